/// \file Conversion of ONNX nodes of older operator versions to the forms the importer takes.
///
/// The importer's node handling, and the Graph IR behind it, take each op in its form of opset
/// 13 (with the attributes and inputs later versions added; see ir/OpSchema.h; RoiAlign in its
/// version-16 form, whose default coordinate mode differs from version 10's, so RoiAlign is
/// converted up to opset 15). A node of an older version whose semantics or signature differ
/// from that form is converted, while the model is imported, into one or more nodes of that
/// form that compute the same outputs (`upgradeNode`). The importer calls it for each node in
/// topological order, after the node's inputs are imported, so a conversion can ask for the
/// rank and dtype of an input and for the value of a constant input. Constants a conversion
/// needs become Constant nodes.
///
/// Every conversion is one function in OldOpsets.cpp whose comment states the semantic
/// difference it handles; that file also lists the ops whose versions between opsets 7 and 12
/// need no conversion (type sets widened, attributes added whose defaults keep the old
/// behaviour, or onnxruntime, against which old models were validated, already implements the
/// old version as the new one). Opsets 7..12 are imported this way; an older model is accepted
/// when each of its ops has the version it has at opset 7.
#pragma once

#include "ir/Graph.h"
#include "onnx/onnx.pb.h"
#include "support/Expected.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace coil {

/// What a conversion may ask about the values imported so far.
struct UpgradeContext {
  /// The model's default-domain opset (for messages).
  int64_t opset = 0;
  /// The type of a value (nullopt when unknown).
  std::function<std::optional<TensorType>(const std::string &)> typeOf;
  /// The contents of a value known at import time (initializer, Constant, folded integers).
  std::function<std::optional<Tensor>(const std::string &)> constantOf;
  /// A tensor name used nowhere in the model, derived from `hint`.
  std::function<std::string(const std::string &)> freshName;
};

/// Whether version `since` of op `op` (the version in effect at the model's opset) needs a
/// conversion to the form the importer takes.
bool needsUpgrade(const std::string &op, int64_t since);

/// The op that node `op` (version `since`) becomes: "Resize" for Upsample, "ScatterElements"
/// for Scatter version 9, `op` itself otherwise.
std::string upgradedOpType(const std::string &op, int64_t since);

/// The nodes that compute what node `n` (version `since` of its op) computes, in the forms the
/// importer takes, in topological order, producing `n`'s outputs under their names (`n` itself
/// when it needs no conversion). Helper nodes carry `n`'s name. A user error (without location; the
/// caller adds the node's) names the form that has no conversion and the way forward.
Expected<std::vector<onnx::NodeProto>> upgradeNode(const onnx::NodeProto &n, int64_t since,
                                                   const UpgradeContext &ctx);

} // namespace coil
