// The lines of plan text (PlanText.h): splitting, words, and the errors of the plan parsers.
#include "codegen/PlanText.h"

#include <cctype>
#include <limits>

namespace coil::codegen::plantext {

namespace {

bool isBare(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '%' ||
         c == '.';
}

} // namespace

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::optional<int64_t> parseInteger(std::string_view t) {
  size_t k = t.size() > 1 && t[0] == '-' ? 1 : 0;
  if (k == t.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t j = k; j < t.size(); ++j) {
    if (!std::isdigit(static_cast<unsigned char>(t[j]))) return std::nullopt;
    int d = t[j] - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return k ? -v : v;
}

Expected<Reader> Reader::split(std::string_view text, std::string path, size_t firstLine) {
  Reader r;
  r.path_ = std::move(path);
  size_t number = firstLine;
  auto at = [&](size_t line, size_t column, const std::string &m) {
    return Error::user(m, SourceLoc{r.path_, "", "", int(line), int(column)});
  };
  for (size_t pos = 0; pos < text.size(); ++number) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view s = text.substr(pos, end - pos);
    pos = end + 1;
    Line l;
    l.number = number;
    size_t i = 0;
    while (i < s.size() && s[i] == ' ') ++i;
    if (i == s.size() || s[i] == '#') continue;
    if (i % 2) return at(number, i + 1, "indentation is two spaces per level");
    l.indent = i / 2;
    while (i < s.size()) {
      Word w;
      w.column = i + 1;
      if (s[i] == '"') {
        w.quoted = true;
        for (++i;; ++i) {
          if (i >= s.size()) return at(number, w.column, "a string without its closing '\"'");
          if (s[i] == '"') break;
          if (s[i] == '\\') {
            if (i + 1 >= s.size() || (s[i + 1] != '"' && s[i + 1] != '\\'))
              return at(number, i + 1, "the escapes of a string are \\\" and \\\\");
            ++i;
          }
          w.text += s[i];
        }
        ++i;
      } else {
        while (i < s.size() && isBare(s[i])) w.text += s[i++];
        if (w.text.empty()) {
          if (s[i] == '#') break;
          return at(number, i + 1,
                    std::string("unexpected character '") + s[i] +
                        "' (a word is letters, digits, "
                        "'_', '-', '%', '.', or a string in double quotes)");
        }
      }
      l.words.push_back(std::move(w));
      if (i < s.size() && s[i] != ' ') return at(number, i + 1, "words are separated by spaces");
      while (i < s.size() && s[i] == ' ') ++i;
    }
    r.lines_.push_back(std::move(l));
  }
  r.endLine_ = number;
  return r;
}

bool Reader::nextIs(size_t indent, std::string_view keyword) const {
  if (atEnd()) return false;
  const Line &l = peek();
  return l.indent == indent && !l.words.empty() && !l.words[0].quoted && l.words[0].text == keyword;
}

Error Reader::error(const Line &l, size_t word, const std::string &message) const {
  size_t column = word < l.words.size() ? l.words[word].column
                  : l.words.empty()     ? 1
                                        : l.words.back().column + l.words.back().text.size() + 1;
  return Error::user(message, SourceLoc{path_, "", "", int(l.number), int(column)});
}

Error Reader::errorAtEnd(const std::string &message) const {
  return Error::user(message, SourceLoc{path_, "", "", int(endLine_), 1});
}

Expected<std::string> Reader::bare(const Line &l, size_t i, const std::string &what) const {
  if (i >= l.words.size() || l.words[i].quoted) return error(l, i, "expected " + what);
  return l.words[i].text;
}

Expected<std::string> Reader::string(const Line &l, size_t i, const std::string &what) const {
  if (i >= l.words.size() || !l.words[i].quoted)
    return error(l, i, "expected " + what + " (a string in double quotes)");
  return l.words[i].text;
}

Expected<int64_t> Reader::integer(const Line &l, size_t i, const std::string &what) const {
  if (i >= l.words.size() || l.words[i].quoted) return error(l, i, "expected " + what);
  std::optional<int64_t> v = parseInteger(l.words[i].text);
  if (!v) return error(l, i, "expected " + what + ", a 64-bit integer: '" + l.words[i].text + "'");
  return *v;
}

Status Reader::keyword(const Line &l, size_t i, std::string_view word) const {
  if (i >= l.words.size() || l.words[i].quoted || l.words[i].text != word)
    return error(l, i, "expected '" + std::string(word) + "'");
  return okStatus();
}

Status Reader::arity(const Line &l, size_t n, const std::string &form) const {
  if (l.words.size() == n) return okStatus();
  return error(l, std::min(n, l.words.size()), "expected '" + form + "'");
}

Expected<size_t> Reader::choice(const Line &l, size_t i, const std::vector<std::string_view> &names,
                                const std::string &what) const {
  COIL_TRY(std::string w, bare(l, i, what));
  std::string list;
  for (size_t k = 0; k < names.size(); ++k) {
    if (w == names[k]) return k;
    list += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + std::string(names[k]);
  }
  return error(l, i, "unknown " + what + " '" + w + "' (" + list + ")");
}

Expected<const Line *> Reader::planHeader(const std::string &kernel, std::string_view device) {
  if (atEnd()) return errorAtEnd("expected the plan of kernel '" + kernel + "'");
  const Line &head = take();
  COIL_TRY_STATUS(keyword(head, 0, "plan"));
  COIL_TRY(std::string name, bare(head, 1, "a kernel name"));
  if (name != kernel)
    return error(head, 1, "expected the plan of kernel '" + kernel + "', not '" + name + "'");
  COIL_TRY_STATUS(keyword(head, 2, device));
  return &head;
}

Expected<const Line *> Reader::expectLine(size_t indent, std::string_view word,
                                          const std::string &where) {
  if (nextIs(indent, word)) return &take();
  std::string m = "expected '" + std::string(word) + "' in " + where;
  return atEnd() ? errorAtEnd(m) : error(peek(), 0, m);
}

Status Reader::planEnd(const std::string &kernel) const {
  if (!atEnd() && peek().indent > 0)
    return error(peek(), 0, "unexpected line in the plan of kernel '" + kernel + "'");
  return okStatus();
}

} // namespace coil::codegen::plantext
