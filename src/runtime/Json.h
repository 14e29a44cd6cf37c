/// \file A small JSON reader for package metadata (no third-party library): RFC 8259 values,
/// objects keep their member order, numbers keep their text (read as int64 or double on demand).
/// Malformed text, nesting deeper than 200 or a number out of range is a user error naming the
/// byte offset; never undefined behaviour.
#pragma once

#include "support/Expected.h"
#include "support/JsonQuote.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coil::json {

struct Member;

struct Value {
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text; ///< String: the decoded string; Number: the number as written
  std::vector<Value> items;
  std::vector<Member> members; ///< Object: in document order (std::vector takes the incomplete
                               ///< Member; a std::pair of an incomplete Value is ill-formed)

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isString() const { return kind == Kind::String; }
  /// The member `key` of an object (the first one), or null.
  const Value *get(std::string_view key) const;
  /// A Number that is an integer in int64 range.
  std::optional<int64_t> asInt() const;
  std::optional<double> asDouble() const;
};

/// One member of an object: `first` the key, `second` the value (pair-like, so that
/// `auto &[key, value]` binds).
struct Member {
  std::string first;
  Value second;
  Member(std::string key, Value value) : first(std::move(key)), second(std::move(value)) {}
};

Expected<Value> parse(std::string_view text);

/// `s` as a JSON string literal (quotes included; control characters escaped).
inline std::string quote(std::string_view s) {
  return jsonQuote(s);
}

} // namespace coil::json
