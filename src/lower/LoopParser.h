/// \file Parses the Loop IR text that printLoopProgram (LoopIR.h) prints, so that Loop IR passes
/// can be tested on text (`coil inspect --loops FILE.loops --pass NAME`).
///
/// Example (the Loop IR of `y = relu(x @ w + b)` after foldGemmBias; `#` starts a comment that
/// runs to the end of the line):
///   symbols N in [1, 64]
///
///   x: f32[N, 4] = input 'x'
///
///   w: f32[4, 2] = constant 'w' [1, 0, 0.5, 0, 0, 1, -2, 1]
///
///   b: f32[2] = constant 'b'               # more than 8 elements: not in the text
///
///   y: f32[N, 2] = extern coil_cpu_gemm_bias_f32(x, w, b, out 0, int 1, int N, int 2, ...)
///     out 0: f32[N, 2]
///
///   input x = x
///   output y = y
///
/// Grammar (whitespace, newlines included, only separates tokens; the printer puts a blank line
/// before every node and one statement per line):
///   program   := ('symbols' symdecl (',' symdecl)*)? node* io*
///   symdecl   := IDENT 'in' '[' int ',' int ']'
///   node      := IDENT ':' type '=' node-kind
///   node-kind := 'input' NAME?
///              | 'constant' (NAME ('[' (elem (',' elem)*)? ']')?)?
///              | 'pointwise' '(' vars? ')' stmt* 'result' VAL
///              | 'reduce' REDUCE DTYPE 'last'? '(' vars? ')' 'over' '(' rvars? ')' stmt*
///                'value' VAL ('position' VAL)?
///              | 'extern' IDENT '(' (arg (',' arg)*)? ')' 'allocates'? ('out' INT ':' type)*
///              | 'output' INT 'of' IDENT
///   vars      := VAR (',' VAR)* ;  rvars := VAR '<' symint (',' VAR '<' symint)*
///   stmt      := VAL '=' ( 'load' DTYPE IDENT '[' (symint (',' symint)*)? ']'
///                        | 'const' DTYPE num
///                        | 'index' DTYPE symint
///                        | OP DTYPE VAL (',' VAL)*            # OP: scalarOpName, lowercase
///                        | ('cast' | 'bitcast') DTYPE VAL
///                        | 'indirect' VAR '=' VAL 'in' '[' '0' ',' symint ')' 'wrap'?
///                        | 'accumulator' DTYPE 'phase' INT 'slot' INT )
///   arg       := IDENT | 'out' INT | 'int' symint | 'float' num | 'outsym' IDENT
///   io        := ('input' | 'output') IONAME '=' IDENT
///   type      := DTYPE '[' (symint (',' symint)*)? ']'
///   symint    := sum ;  sum := term (('+' | '-') term)* ;  term := unary (('*' | '//' | '%')
///                unary)* ;  unary := '-' unary | primary
///   primary   := INT | IDENT | VAR | ('min' | 'max') '(' sum (',' sum)+ ')' | '(' sum ')'
///   int       := '-'? INT ;  num := '-'? (INT | FLOAT | 'inf' | 'nan')
///   elem      := num | BITS | 'true' | 'false'      # as in `.coil` tensor literals
///   VAL       := '%' DIGITS   # statement i of a body is %i; operands name earlier statements
///   VAR       := '%' [A-Za-z0-9_]+                  # loop variables, IndirectIndex symbols
///   NAME      := "'" (char | '\\' | "\'" | '\xHH')* "'"
///   IONAME    := NAME | a run of printable characters other than space, quote, '\' and '#',
///                starting with a letter, digit or '_'
/// A node's elements are those of its constant, row-major (its shape must be static). Nodes are
/// named by IDENT and referred to only after their definition. `%` followed by a letter, digit
/// or '_' is a VAR or VAL, otherwise floor modulo (SymInt.h: the printer writes ` % `).
///
/// What the text does not hold: node origins and locations (a parsed node's `loc` is its text
/// position), and the elements of constants larger than kMaxPrintedConstantElements. Such a
/// constant parses into a graph value of kind Constant without data (Graph::isConstant is
/// false): the program can be printed, verified and rewritten, not evaluated or compiled.
///
/// Errors are user errors at `file:line:column` that say what was expected. The parsed program
/// is verified (LoopVerify.h); a violation is a user error at the line of the node at fault.
#pragma once

#include "ir/Graph.h"
#include "lower/LoopIR.h"
#include "support/Expected.h"

#include <memory>
#include <string>
#include <string_view>

namespace coil::loop {

/// A parsed program and the graph that its Input and Constant nodes name (one graph input per
/// Input node, one constant per Constant node, each with the node's type; the graph has no
/// nodes). `program.graph` points at `*graph`, which moves with it.
struct ParsedLoopProgram {
  std::unique_ptr<Graph> graph;
  LoopProgram program;
};

/// Parses `text`; `file` names it in errors.
Expected<ParsedLoopProgram> parseLoopProgram(std::string_view text,
                                             const std::string &file = "<input>");
Expected<ParsedLoopProgram> parseLoopProgramFile(const std::string &path);

} // namespace coil::loop
