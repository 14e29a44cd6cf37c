#include "runtime/Json.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace coil::json {

const Value *Value::get(std::string_view key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto &[k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

std::optional<int64_t> Value::asInt() const {
  if (kind != Kind::Number || text.find_first_of(".eE") != std::string::npos) return std::nullopt;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return int64_t(v);
}

std::optional<double> Value::asDouble() const {
  if (kind != Kind::Number) return std::nullopt;
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

namespace {

class Parser {
public:
  explicit Parser(std::string_view s) : s_(s) {}

  Expected<Value> document() {
    Value v;
    if (!value(v, 0)) return err();
    ws();
    if (i_ != s_.size()) {
      msg_ = "unexpected text after the value";
      return err();
    }
    return v;
  }

private:
  Error err() const {
    return Error::user("invalid json at byte " + std::to_string(i_) + ": " + msg_);
  }
  bool fail(std::string m) {
    if (msg_.empty()) msg_ = std::move(m);
    return false;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return fail("expected '" + std::string(w) + "'");
    i_ += w.size();
    return true;
  }

  bool value(Value &v, int depth) {
    if (depth > 200) return fail("nesting deeper than 200");
    ws();
    if (i_ >= s_.size()) return fail("unexpected end of text");
    char c = s_[i_];
    switch (c) {
    case 'n':
      v.kind = Value::Kind::Null;
      return lit("null");
    case 't':
      v.kind = Value::Kind::Bool, v.boolean = true;
      return lit("true");
    case 'f':
      v.kind = Value::Kind::Bool, v.boolean = false;
      return lit("false");
    case '"':
      v.kind = Value::Kind::String;
      return string(v.text);
    case '[': {
      v.kind = Value::Kind::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (;;) {
        v.items.emplace_back();
        if (!value(v.items.back(), depth + 1)) return false;
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return fail("expected ',' or ']'");
      }
    }
    case '{': {
      v.kind = Value::Kind::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      for (;;) {
        ws();
        std::string key;
        if (i_ >= s_.size() || s_[i_] != '"') return fail("expected a member name");
        if (!string(key)) return false;
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') return fail("expected ':'");
        ++i_;
        v.members.emplace_back(std::move(key), Value());
        if (!value(v.members.back().second, depth + 1)) return false;
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return fail("expected ',' or '}'");
      }
    }
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return number(v);
      return fail(std::string("unexpected character '") + c + "'");
    }
  }

  bool number(Value &v) {
    size_t start = i_;
    auto digits = [&] {
      size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > d;
    };
    if (s_[i_] == '-') ++i_;
    if (!digits()) return fail("bad number");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return fail("bad number");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return fail("bad number");
    }
    v.kind = Value::Kind::Number;
    v.text = std::string(s_.substr(start, i_ - start));
    return true;
  }

  static void utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80)
      out += char(cp);
    else if (cp < 0x800)
      out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)),
          out += char(0x80 | (cp & 0x3F));
    else
      out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F)),
          out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  }

  bool hex4(uint32_t &cp) {
    if (i_ + 4 > s_.size()) return fail("bad \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f')
        cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        cp |= uint32_t(h - 'A' + 10);
      else
        return fail("bad \\u escape");
    }
    return true;
  }

  bool string(std::string &out) {
    ++i_; // opening quote
    for (;;) {
      if (i_ >= s_.size()) return fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return true;
      if ((unsigned char)c < 0x20) return fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return fail("unterminated string");
      char e = s_[i_++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp)) return false;
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t lo;
          if (s_.substr(i_, 2) != "\\u") return fail("unpaired surrogate");
          i_ += 2;
          if (!hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return fail("unpaired surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return fail("unpaired surrogate");
        }
        utf8(out, cp);
        break;
      }
      default:
        return fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string msg_;
};

} // namespace

Expected<Value> parse(std::string_view text) {
  return Parser(text).document();
}


} // namespace coil::json
