/// \file Parses coil's text format (grammar in Printer.h) into a Graph.
///
/// Errors are user errors located at `file:line:column` and say what was expected
/// (`expected ':' after value name`). After parsing, the graph is verified (Verifier.h);
/// a verifier failure is reported as a user error at the line of the node or value at fault.
/// Nodes of the parsed graph carry their text position in `loc.line` / `loc.column`; their
/// `loc.file`, `loc.node` and `loc.op` come from the node's `loc(...)` clause only.
#pragma once

#include "ir/Graph.h"
#include "ir/Verifier.h"
#include "support/Expected.h"

#include <string>
#include <string_view>

namespace coil {

struct ParseOptions {
  /// Options of the verifier run on the parsed graph (e.g. reinfer = false to accept ops that
  /// have no inference function yet).
  VerifyOptions verify;
};

/// Parses `text`; `file` names it in errors, which carry line and column.
Expected<Graph> parseGraph(std::string_view text, const std::string &file = "<input>",
                           const ParseOptions &opts = {});
Expected<Graph> parseGraphFile(const std::string &path, const ParseOptions &opts = {});

} // namespace coil
