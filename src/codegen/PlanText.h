/// \file The lines of plan text: the form in which `coil inspect --plans` prints the planners'
/// decisions (cpu/CpuPlan.h, cuda/CudaPlan.h) and from which they parse again. Each backend's
/// grammar is in its plan header; this file holds what they share.
///
/// A line is two spaces of indentation per level, then words separated by single spaces. A word
/// is bare (letters, digits and `_ - % .`, e.g. `k0_max`, `128`, `%3`) or a string in double
/// quotes, which holds C text or a size expression, with `\"` and `\\` its only escapes. Blank
/// lines and `#` comments (outside strings) are skipped.
#pragma once

#include "support/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace coil::codegen::plantext {

/// `s` in double quotes, `"` and `\` escaped.
std::string quote(const std::string &s);

/// The value of `text`, an optional '-' then decimal digits, if it fits in 64 bits.
std::optional<int64_t> parseInteger(std::string_view text);

struct Word {
  std::string text;
  bool quoted = false;
  size_t column = 0; ///< 1-based
};

struct Line {
  size_t number = 0; ///< 1-based, in the file
  size_t indent = 0; ///< levels (two spaces each)
  std::vector<Word> words;
};

/// Plan text split into lines, read front to back by the plan parsers. Errors are user errors
/// at `path:line:column`.
class Reader {
public:
  /// `text` starts at line `firstLine` of `path` (a plans section after a schedule).
  static Expected<Reader> split(std::string_view text, std::string path, size_t firstLine = 1);

  bool atEnd() const { return pos_ >= lines_.size(); }
  const Line &peek() const { return lines_[pos_]; }
  /// The next line, if it is indented `indent` levels and starts with `keyword`.
  bool nextIs(size_t indent, std::string_view keyword) const;
  const Line &take() { return lines_[pos_++]; }

  Error error(const Line &l, size_t word, const std::string &message) const;
  /// An error at the end of the text (a plan cut short).
  Error errorAtEnd(const std::string &message) const;

  /// Word `i` of `l`, bare, or an error that names `what` was expected there.
  Expected<std::string> bare(const Line &l, size_t i, const std::string &what) const;
  Expected<std::string> string(const Line &l, size_t i, const std::string &what) const;
  Expected<int64_t> integer(const Line &l, size_t i, const std::string &what) const;
  /// `word` at word `i` of `l` (a keyword of the grammar).
  Status keyword(const Line &l, size_t i, std::string_view word) const;
  /// `l` has exactly `n` words.
  Status arity(const Line &l, size_t n, const std::string &form) const;
  /// Word `i` of `l` as an index into `names` (an error names `what` and the choices).
  Expected<size_t> choice(const Line &l, size_t i, const std::vector<std::string_view> &names,
                          const std::string &what) const;

  /// Takes the header of kernel `kernel`'s plan, `plan KERNEL DEVICE ...`.
  Expected<const Line *> planHeader(const std::string &kernel, std::string_view device);
  /// Takes the next line, which must be `keyword` at `indent` (`where` names the plan).
  Expected<const Line *> expectLine(size_t indent, std::string_view keyword,
                                    const std::string &where);
  /// An error unless the plan has ended (the next line, if any, is a plan's header).
  Status planEnd(const std::string &kernel) const;

private:
  std::string path_;
  std::vector<Line> lines_;
  size_t pos_ = 0, endLine_ = 0;
};

/// The round trip of `text`, the printed form of `plan`: `parse(Reader &)` reads it back to an
/// equal plan, and `print(plan)` prints that plan as `text` again. An internal error of `what`
/// (the backend and kernel) where either fails: its printer and parser disagree.
template <class Plan, class ParseFn, class PrintFn>
Status checkRoundTrip(const std::string &text, const Plan &plan, const std::string &what,
                      ParseFn parse, PrintFn print) {
  auto broken = [&](const std::string &why) {
    return Error::internal(what + ": its plan text " + why);
  };
  auto r = Reader::split(text, "plan text");
  if (!r) return broken("does not split into lines: " + r.error().render());
  auto parsed = parse(*r);
  if (!parsed) return broken("does not parse: " + parsed.error().render());
  if (!r->atEnd()) return broken("goes on after the plan");
  if (!(*parsed == plan)) return broken("parses to another plan");
  if (print(*parsed) != text) return broken("prints again differently");
  return okStatus();
}

} // namespace coil::codegen::plantext
