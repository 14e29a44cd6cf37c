/// \file JSON string literals, for every writer of JSON (package metadata, reports).
#pragma once

#include <string>
#include <string_view>

namespace coil {

/// `s` as a JSON string literal: quotes included, `"` `\` and control characters escaped.
std::string jsonQuote(std::string_view s);

} // namespace coil
