/// \file The ONNX operator schemas of the ops in Ops.def: input and output arity and the
/// attributes (name, kind, required) of every version, generated at build time from the
/// installed onnx package (scripts/gen_onnx_schemas.py -> OnnxSchemas.inc).
///
/// The Graph IR holds ONNX nodes in the form of any opset from kMinIrOpset through the newest
/// (e.g. ReduceMean's `axes` is an attribute at opset 13 and an input from 18), so the verifier
/// checks nodes against irOpSchema(op): the versions in effect at those opsets, merged.
#pragma once

#include "ir/Attr.h"
#include "ir/Op.h"

#include <optional>
#include <string_view>
#include <vector>

namespace coil {

/// The oldest opset whose op forms the Graph IR accepts (the importer's kMinOnnxOpset).
constexpr int64_t kMinIrOpset = 13;
/// coil's own attribute (int, 1) on a Conv that lowers through the channels-last extern
/// (lower/ChannelsLast.h sets it). irOpSchema(Conv) lists it: the only attribute that is not
/// ONNX's.
inline constexpr const char *kChannelsLastAttr = "coil_channels_last";

/// An arity bound meaning "any number" (variadic inputs or outputs).
constexpr int kAnyArity = 1 << 30;

struct OpAttrSchema {
  std::string_view name;
  /// The Attr kind of the ONNX attribute type; nullopt for types coil has no kind for (graph,
  /// sparse tensor, tensors, type protos).
  std::optional<AttrKind> kind;
  int onnxType = 0; ///< the onnx AttributeProto type
  bool required = false;
};

struct OpSchema {
  OpKind op = OpKind::NumOps;
  int since = 0; ///< the opset that introduced this version (the oldest one for merged schemas)
  int minInputs = 0, maxInputs = 0, minOutputs = 0, maxOutputs = 0;
  bool deprecated = false;
  std::vector<OpAttrSchema> attrs; ///< sorted by name

  const OpAttrSchema *findAttr(std::string_view name) const;
};

/// The newest opset of the generated table.
int64_t newestOpset();
/// The Attr kind of an onnx AttributeProto type (FLOAT=1, INT=2, STRING=3, TENSOR=4, FLOATS=6,
/// INTS=7, STRINGS=8), or nullopt.
std::optional<AttrKind> attrKindFromOnnxType(int onnxType);
/// Whether an attribute of kind `actual` may stand where the schema says `expected`: the same
/// kind, and `int` for `float` (Attrs::getFloat converts it). No ONNX attribute takes `syms`.
bool attrKindAccepts(AttrKind expected, AttrKind actual);

/// Every version of `op`'s schema, oldest first (empty if ONNX has none).
const std::vector<OpSchema> &opSchemaVersions(OpKind op);
/// The version of `op`'s schema in effect at `opset` (the newest with since <= opset), or nullptr.
const OpSchema *opSchema(OpKind op, int64_t opset);
/// The versions in effect at opsets kMinIrOpset..newestOpset() merged: the widest arity bounds,
/// every attribute any of them has (kind of the newest that has it), required only where all
/// of them require it; deprecated when the newest is; plus kChannelsLastAttr on Conv. nullptr
/// if ONNX has no schema for `op`.
const OpSchema *irOpSchema(OpKind op);

} // namespace coil
