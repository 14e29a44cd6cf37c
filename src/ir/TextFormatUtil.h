/// \file Pieces of the `.coil` text format shared by the printer and the parser: how names,
/// tensor elements and floats are spelled. Internal to the compiler (not part of the public
/// API); the Loop IR text (lower/LoopParser.h) spells constant elements with it too.
#pragma once

#include "support/DType.h"
#include "support/Expected.h"
#include "support/SymInt.h"

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
/// `-nan` for the specials, and the bit pattern (`0x7ff0000000000001`) for a NaN other than
/// the default quiet NaN. With `forceFloat`, a finite result always holds '.' or 'e' (so it
/// cannot be read as an integer).
std::string formatDouble(double v, bool forceFloat);
/// The same for a float32 value (read back with strtof).
std::string formatFloat(float v);

/// Appends element `i` of a buffer of type `t` as list text (a float whose decimal text would
/// not reproduce its bytes, i.e. a NaN with a payload, prints as its bit pattern `0x7fc00001`);
/// returns false where the list form cannot reproduce the bytes (a bool byte other than 0/1),
/// in which case the tensor must be printed as hex.
bool appendElement(std::string &out, DType t, const void *data, size_t i);

/// Parses one element's text (already joined with its sign, e.g. "-1.5", "nan", "true", or a
/// float's bit pattern "0x7fc00001") into `dst` (dtypeSize(t) bytes). Returns an error message,
/// or "" on success.
std::string parseElement(DType t, std::string_view text, bool isFloatToken, void *dst);

/// Parses a size expression with the text parser's grammar (the whole text must be one
/// expression). The printer uses it to check that a dim's text reads back exactly.
Expected<SymInt> parseSymIntText(std::string_view text);

} // namespace coil::textfmt
