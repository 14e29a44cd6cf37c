/// \file Parses coil's text format (grammar in Printer.h) into a Graph.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

#include <string>
#include <string_view>

namespace coil {

/// Parses `text`; `file` names it in errors, which carry line and column.
Expected<Graph> parseGraph(std::string_view text, const std::string &file = "<input>");
Expected<Graph> parseGraphFile(const std::string &path);

} // namespace coil
