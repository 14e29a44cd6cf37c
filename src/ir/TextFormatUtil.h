/// \file Pieces of the `.coil` text format shared by the printer and the parser: how names,
/// tensor elements and floats are spelled. Internal to ir/ (not part of the public API).
#pragma once

#include "ir/DType.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace coil::textfmt {

/// Constants with at most this many elements print as element lists, larger ones as hex.
constexpr int64_t kMaxListElements = 32;

/// [A-Za-z_][A-Za-z0-9_]*
bool isIdentifier(std::string_view s);
/// A value or graph name that prints without quotes: [A-Za-z0-9_.]+
bool isBareName(std::string_view s);
/// `"..."` with `\\`, `\"`, `\n`, `\t`, `\r` and `\xHH` for other bytes outside 0x20..0x7e.
void appendQuoted(std::string &out, std::string_view s);
/// `%name` or `%"name"` (prefix '%' or '@').
void appendName(std::string &out, char prefix, std::string_view name);

/// The shortest decimal text that reads back (strtod) as exactly `v`; `inf`, `-inf`, `nan`,
/// `-nan` for the specials. With `forceFloat`, a finite result always holds '.' or 'e' (so it
/// cannot be read as an integer).
std::string formatDouble(double v, bool forceFloat);
/// The same for a float32 value (read back with strtof).
std::string formatFloat(float v);

/// Appends element `i` of a buffer of type `t` as list text; returns false where the list
/// form cannot reproduce the bytes exactly (a NaN with a payload, a bool byte other than 0/1),
/// in which case the tensor must be printed as hex.
bool appendElement(std::string &out, DType t, const void *data, size_t i);

/// Parses one element's text (already joined with its sign, e.g. "-1.5", "nan", "true") into
/// `dst` (dtypeSize(t) bytes). Returns an error message, or "" on success.
std::string parseElement(DType t, std::string_view text, bool isFloatToken, void *dst);

} // namespace coil::textfmt
