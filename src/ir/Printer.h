/// \file Prints a Graph in coil's text format (`.coil`); Parser.h reads it back.
///
/// Grammar (one statement per line, `#` starts a comment):
///   graph      := 'graph' '@' NAME '(' params? ')' '->' '(' results? ')' '{' stmt* '}'
///   params     := '%' NAME ':' type (',' '%' NAME ':' type)*
///   results    := '%' NAME (',' '%' NAME)*
///   stmt       := 'symbol' NAME 'in' '[' INT ',' INT ']'
///               | '%' NAME '=' 'constant' type tensor-literal
///               | '%' NAME '=' 'symconst' type '[' symint (',' symint)* ']'
///               | outs '=' OpType '(' args? ')' attrs? ':' types loc?
///   type       := DTYPE '[' (symint (',' symint)*)? ']'
/// Names that are not identifiers are printed quoted: %"name with/chars".
/// The printer is deterministic: the same graph prints byte-identically.
#pragma once

#include "ir/Graph.h"

#include <ostream>
#include <string>

namespace coil {

std::string printGraph(const Graph &g);
void printGraph(const Graph &g, std::ostream &os);

} // namespace coil
