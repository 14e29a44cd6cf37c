/// \file Prints a Graph in coil's text format (`.coil`); Parser.h reads it back.
///
/// Example:
///   graph @main(%x: f32[N, 4], %s: i64[2]) -> (%y, %x) {
///     symbol N in [1, 64]
///     %w = constant f32[4] [1, 2.5, -inf, nan]
///     %big = constant f32[1000] hex "0000803f..."
///     %shape = symconst i64[2] [2*N, 2]
///     %y = Add(%x, %w) {alpha = 1.0, axes = [0, 1]} : f32[N, 4] name "add0" loc("m.onnx",
///          "add0", "Add")                   # (one line)
///     %r = Resize(%x, _, _, %shape) {mode = "linear"} : f32[2*N, 2]
///   }
///
/// Grammar (`#` starts a comment that runs to the end of the line; whitespace, newlines
/// included, only separates tokens; the printer puts one statement per line):
///   graph      := 'graph' GLOBAL '(' params? ')' '->' '(' results? ')' '{' stmt* '}'
///   params     := VALUE ':' type (',' VALUE ':' type)*
///   results    := VALUE (',' VALUE)*            # any value: input, constant, node output
///   stmt       := 'symbol' SYMNAME ('in' '[' int ',' int ']')?
///               | VALUE '=' 'constant' tensor-lit
///               | VALUE '=' 'symconst' type '[' symint (',' symint)* ']'
///               | (VALUE (',' VALUE)* '=')? OPNAME '(' args? ')' attrs? (':' type (',' type)*)?
///                 ('name' STRING)? ('loc' '(' STRING ',' STRING ',' STRING ')')?
///   args       := arg (',' arg)* ;  arg := VALUE | '_'     # '_' is an absent optional input
///   attrs      := '{' (attr (',' attr)*)? '}' ;  attr := (IDENT | STRING) '=' attr-value
///   attr-value := int                                       # int
///               | float                                     # float: has '.', 'e', inf, nan or 0x
///               | STRING                                    # string
///               | '[' int (',' int)* ']'     | 'ints' '[' ']'      # ints
///               | '[' num (',' num)* ']'     | 'floats' '[' ']'    # floats (any element a float)
///               | '[' STRING (',' STRING)* ']' | 'strings' '[' ']' # strings
///               | 'syms' '[' (symint (',' symint)*)? ']'           # syms
///               | 'tensor' tensor-lit                              # tensor
///   tensor-lit := type '[' (elem (',' elem)*)? ']'   # row-major elements, count == numel
///               | type 'hex' STRING                  # raw little-endian bytes, 2 digits each
///   elem       := num | 'true' | 'false'
///   type       := DTYPE '[' (symint (',' symint)*)? ']'   # f64 f32 f16 bf16 i64 ... u8 bool
///   symint     := sum ;  sum := term (('+' | '-') term)*
///   term       := unary (('*' | '//' | '%') unary)*
///   unary      := '-' unary | primary
///   primary    := INT | SYMNAME | ('min' | 'max') '(' sum (',' sum)+ ')' | '(' sum ')'
///   int        := '-'? INT ;  num := '-'? (INT | FLOAT | 'inf' | 'nan') | BITS
///   BITS       := '0x' HEXDIGIT+     # a float's bit pattern (a NaN with a payload); in a
///                                    # float attribute it is the f64 pattern
///   VALUE      := '%' [A-Za-z0-9_.]+ | '%' STRING ;  GLOBAL := '@' [A-Za-z0-9_.]+ | '@' STRING
///   SYMNAME    := IDENT | STRING ;  IDENT := [A-Za-z_][A-Za-z0-9_]*
///   STRING     := '"' (char | '\\' | '\"' | '\n' | '\t' | '\r' | '\xHH')* '"'
/// `//` and `%` are floor division and modulo (SymInt.h); in a size, `N %4` (which lexes as a
/// value name) also reads as `N % 4`. A value must be defined before it is used (graph outputs
/// may name any value). `loc(FILE, NODE, OP)` is the node's SourceLoc; its line and column are
/// not printed (the parser sets them to the node's text position).
///
/// Printing is exact: parse(print(g)) prints byte-identically and equals g structurally
/// (floats print as the shortest decimal that reads back exactly, NaNs other than the default
/// quiet NaN as their bit pattern; a constant with at most 32 elements prints as a list unless
/// that cannot reproduce its bytes, e.g. a bool byte of 2; larger ones print as hex). Values
/// print in the order: inputs, constants and symbolic constants (by ValueId), node outputs
/// (node order); the parser numbers them in text order.
/// Names that do not fit the bare forms are printed quoted: %"onnx::Conv/0". The printer is
/// deterministic: the same graph prints byte-identically.
#pragma once

#include "ir/Graph.h"

#include <ostream>
#include <string>

namespace coil {

std::string printGraph(const Graph &g);
void printGraph(const Graph &g, std::ostream &os);

} // namespace coil
