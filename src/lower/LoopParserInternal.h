/// \file Private to the Loop IR text parser (LoopLexer.cpp: tokens; LoopParser.cpp: the
/// program): the token and the lexer.
#pragma once

#include <string>
#include <string_view>

// Internal (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::loop::text {

enum class Tok { Eof, Ident, Var, Int, Float, String, Punct, Error };

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; ///< the source text
  std::string str;       ///< a decoded name (String), or the message of an Error token
  int line = 1, col = 1;
};

/// Lexes on demand, one token at a time; a copy of the lexer looks ahead. A bad character or
/// name is an Error token carrying the message.
class Lexer {
public:
  explicit Lexer(std::string_view s) : s_(s) {}

  Token next();
  /// IONAME (LoopParser.h): a quoted name or a bare word; anything else lexes as usual.
  Token nextName();

private:
  char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
  void advance() {
    if (s_[p_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++p_;
  }
  void skipSpace();
  Token start() const {
    Token t;
    t.line = line_;
    t.col = col_;
    return t;
  }
  Token finish(Token t, Tok kind, size_t begin) const {
    t.kind = kind;
    t.text = s_.substr(begin, p_ - begin);
    return t;
  }
  static Token error(Token t, std::string msg) {
    t.kind = Tok::Error;
    t.str = std::move(msg);
    return t;
  }
  Token quoted(Token t);
  Token number(Token t);

  std::string_view s_;
  size_t p_ = 0;
  int line_ = 1, col_ = 1;
};

} // namespace coil::loop::text

#pragma GCC visibility pop
