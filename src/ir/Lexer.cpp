// The lexer of the `.coil` text format: tokens with their line and column; a bad character or
// string is an Error token carrying the message.
#include "ir/ParserInternal.h"

#include <cctype>
#include <cstring>

namespace coil::textfmt {

namespace {

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

} // namespace

std::vector<Token> Lexer::run() {
  std::vector<Token> toks;
  for (;;) {
    toks.push_back(next());
    if (toks.back().kind == Tok::Eof || toks.back().kind == Tok::Error) return toks;
  }
}

Token Lexer::error(Token t, std::string msg) {
  t.kind = Tok::Error;
  t.str = std::move(msg);
  return t;
}

bool Lexer::readString(Token &t) {
  advance(); // opening quote
  for (;;) {
    if (p_ >= s_.size() || peek() == '\n') {
      t.str = "unterminated string";
      return false;
    }
    char c = peek();
    if (c == '"') {
      advance();
      return true;
    }
    if (c != '\\') {
      // Plain run: copy as much as possible at once (hex constants are long).
      size_t b = p_;
      while (p_ < s_.size() && s_[p_] != '"' && s_[p_] != '\\' && s_[p_] != '\n') ++p_;
      col_ += int(p_ - b);
      t.str.append(s_.data() + b, p_ - b);
      continue;
    }
    advance();
    char e = peek();
    switch (e) {
    case '\\':
      t.str += '\\';
      break;
    case '"':
      t.str += '"';
      break;
    case 'n':
      t.str += '\n';
      break;
    case 't':
      t.str += '\t';
      break;
    case 'r':
      t.str += '\r';
      break;
    case 'x': {
      int hi = hexDigit(peek(1)), lo = hexDigit(peek(2));
      if (hi < 0 || lo < 0) {
        t.str = "expected two hex digits after '\\x' in string";
        return false;
      }
      t.str += char(hi * 16 + lo);
      advance();
      advance();
      break;
    }
    default:
      t.str = "unknown escape sequence in string";
      return false;
    }
    advance();
  }
}

Token Lexer::next() {
  skipSpaceAndComments();
  Token t;
  t.line = line_;
  t.col = col_;
  size_t b = p_;
  if (p_ >= s_.size()) return t;
  char c = peek();
  auto finish = [&](Tok k) {
    t.kind = k;
    t.text = s_.substr(b, p_ - b);
    return t;
  };
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
    return finish(Tok::Ident);
  }
  if (isDigit(c)) return finish(scanNumber() ? Tok::Float : Tok::Int);
  if (c == '"') {
    if (!readString(t)) return error(t, t.str);
    return finish(Tok::String);
  }
  if ((c == '%' || c == '@') && (isNameChar(peek(1)) || peek(1) == '"')) {
    advance();
    if (peek() == '"') {
      if (!readString(t)) return error(t, t.str);
    } else {
      while (isNameChar(peek())) advance();
      t.str = std::string(s_.substr(b + 1, p_ - b - 1));
    }
    return finish(c == '%' ? Tok::ValueName : Tok::GlobalName);
  }
  if ((c == '-' && peek(1) == '>') || (c == '/' && peek(1) == '/')) {
    advance();
    advance();
    return finish(Tok::Punct);
  }
  if (c != '\0' && std::strchr("()[]{},:=+-*%", c)) {
    advance();
    return finish(Tok::Punct);
  }
  return error(t, unexpectedChar(c));
}

} // namespace coil::textfmt
