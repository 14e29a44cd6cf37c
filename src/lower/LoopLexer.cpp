// The lexer of the Loop IR text (grammar in LoopParser.h): tokens with their line and column.
#include "lower/LoopParserInternal.h"

#include <cctype>
#include <cstring>

namespace coil::loop::text {

namespace {

bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

int hexDigit(char h) {
  return h >= '0' && h <= '9'   ? h - '0'
         : h >= 'a' && h <= 'f' ? h - 'a' + 10
         : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                : -1;
}

} // namespace

void Lexer::skipSpace() {
  for (;;) {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(peek()))) advance();
    if (p_ >= s_.size() || peek() != '#') return;
    while (p_ < s_.size() && peek() != '\n') advance();
  }
}

// NAME := "'" (char | '\\' | "\'" | '\xHH')* "'"
Token Lexer::quoted(Token t) {
  size_t b = p_;
  advance();
  for (;;) {
    if (p_ >= s_.size() || peek() == '\n')
      return error(t, "unterminated name: a closing ' is missing");
    char c = peek();
    if (c == '\'') {
      advance();
      return finish(std::move(t), Tok::String, b);
    }
    if (c != '\\') {
      t.str += c;
      advance();
      continue;
    }
    char e = peek(1);
    if (e == '\\' || e == '\'') {
      t.str += e;
      advance();
      advance();
    } else if (e == 'x' && hexDigit(peek(2)) >= 0 && hexDigit(peek(3)) >= 0) {
      t.str += char(hexDigit(peek(2)) * 16 + hexDigit(peek(3)));
      for (int k = 0; k < 4; ++k) advance();
    } else {
      return error(t, "unknown escape in a name (\\\\, \\' and \\xHH are allowed)");
    }
  }
}

Token Lexer::number(Token t) {
  size_t b = p_;
  if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) { // a float's bit pattern
    advance();
    advance();
    while (std::isalnum(static_cast<unsigned char>(peek()))) advance();
    return finish(std::move(t), Tok::Float, b);
  }
  bool isFloat = false;
  while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  if (peek() == '.') {
    isFloat = true;
    advance();
    while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (std::isdigit(static_cast<unsigned char>(peek(1))) ||
       ((peek(1) == '+' || peek(1) == '-') && std::isdigit(static_cast<unsigned char>(peek(2)))))) {
    isFloat = true;
    advance();
    if (peek() == '+' || peek() == '-') advance();
    while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  }
  return finish(std::move(t), isFloat ? Tok::Float : Tok::Int, b);
}

Token Lexer::next() {
  skipSpace();
  Token t = start();
  size_t b = p_;
  if (p_ >= s_.size()) return t;
  char c = peek();
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    while (isWordChar(peek())) advance();
    return finish(std::move(t), Tok::Ident, b);
  }
  if (c == '%' && isWordChar(peek(1))) {
    advance();
    while (isWordChar(peek())) advance();
    return finish(std::move(t), Tok::Var, b);
  }
  if (std::isdigit(static_cast<unsigned char>(c))) return number(std::move(t));
  if (c == '\'') return quoted(std::move(t));
  if (c == '/' && peek(1) == '/') {
    advance();
    advance();
    return finish(std::move(t), Tok::Punct, b);
  }
  if (c != '\0' && std::strchr("()[],:=+-*%<", c)) {
    advance();
    return finish(std::move(t), Tok::Punct, b);
  }
  static const char kHex[] = "0123456789abcdef";
  auto u = static_cast<unsigned char>(c);
  std::string shown =
      std::isprint(u) ? std::string(1, c) : std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
  return error(std::move(t), "unexpected character '" + shown + "'");
}

Token Lexer::nextName() {
  skipSpace();
  if (peek() == '\'') return quoted(start());
  if (!isWordChar(peek())) return next();
  Token t = start();
  size_t b = p_;
  for (auto c = static_cast<unsigned char>(peek());
       p_ < s_.size() && c > 0x20 && c <= 0x7e && c != '\'' && c != '\\' && c != '#';
       c = static_cast<unsigned char>(peek()))
    advance();
  t.str = std::string(s_.substr(b, p_ - b));
  return finish(std::move(t), Tok::String, b);
}

} // namespace coil::loop::text
