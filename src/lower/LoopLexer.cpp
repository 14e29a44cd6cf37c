// The lexer of the Loop IR text (grammar in LoopParser.h): tokens with their line and column.
#include "lower/LoopParserInternal.h"

#include <cctype>
#include <cstring>

namespace coil::loop::text {

namespace {

bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

} // namespace

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

Token Lexer::next() {
  skipSpaceAndComments();
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
  if (isDigit(c)) {
    bool isFloat = scanNumber();
    return finish(std::move(t), isFloat ? Tok::Float : Tok::Int, b);
  }
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
  return error(std::move(t), unexpectedChar(c));
}

Token Lexer::nextName() {
  skipSpaceAndComments();
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
