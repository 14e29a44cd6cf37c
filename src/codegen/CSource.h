/// \file Shared pieces of the C-like kernel emitters (CPU C++ now, CUDA C++ later): an indenting
/// line writer, collision-free C identifiers, and exact literals.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace coil::codegen {

/// Accumulates lines of code with two-space indentation.
class CodeWriter {
public:
  void line(const std::string &text);
  void open(const std::string &head); ///< `head {` and indent
  void close(const std::string &tail = "}");
  void blank() { text_ += '\n'; }
  void indent() { ++depth_; }
  void dedent() { --depth_; }
  const std::string &str() const { return text_; }

private:
  std::string text_;
  int depth_ = 0;
};

/// Hands out unique C identifiers. Names the emitter itself generates follow fixed patterns
/// (a reserved prefix followed by a digit, e.g. `v3`, `acc0_1`); names derived from the program
/// (nodes, symbols) are sanitized and renamed (`_2` suffix) when they would collide with those,
/// with C/C++ keywords, with helper names (`coil_*`) or with each other.
class NameTable {
public:
  /// `reservedPrefixes`: prefixes of generated names (`v` reserves v0, v1, ...); each is letters
  /// only, so that a hint's name can be kept out of their way by construction.
  explicit NameTable(std::set<std::string> reservedPrefixes);
  /// Reserves an exact name (a fixed local such as `begin`).
  void reserve(const std::string &name) { used_.insert(name); }
  /// A fresh identifier derived from `hint`: the sanitized hint, escaped as `m_<hint>` when it
  /// has the form of a reserved name (a prefix followed by a digit, `coil_...`, `__...`), then
  /// numbered `<base>_2`, `<base>_3`, ... past the names already used. A base's counter is kept,
  /// so naming N values costs O(N log N) whatever the hints are.
  std::string fresh(const std::string &hint);

private:
  /// A generated name's form (a reserved prefix and a digit, `coil_`, `__`), or a C keyword.
  bool reservedForm(const std::string &name) const;
  std::set<std::string> prefixes_, used_;
  std::map<std::string, int64_t> nextSuffix_;
};

/// `[A-Za-z_][A-Za-z0-9_]*`: other characters become '_', a leading digit gets a '_' prefix.
std::string sanitizeIdentifier(const std::string &s);
/// A C literal with exactly the value `v` as float (`1.5f`, `0.100000001f`, `NAN`, `-INFINITY`)
/// or double; negative values are parenthesized.
std::string floatLiteral(float v);
std::string doubleLiteral(double v);
/// An int64 literal (`INT64_C(...)`-free: `(-9223372036854775807 - 1)` for the minimum).
std::string int64Literal(int64_t v);

} // namespace coil::codegen
