// The ONNX operator schema table, from the generated OnnxSchemas.inc.
#include "ir/OpSchema.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>

namespace coil {

namespace {

// First pass over the table: only its #defines (COIL_ONNX_MAX_OPSET, ...).
#define COIL_ONNX_SCHEMA(...)
#define COIL_ONNX_ATTR(...)
#include "OnnxSchemas.inc"
#undef COIL_ONNX_SCHEMA
#undef COIL_ONNX_ATTR

struct Tables {
  std::array<std::vector<OpSchema>, kNumOps> versions;
  std::array<std::optional<OpSchema>, kNumOps> merged;
};

OpAttrSchema makeAttr(const char *name, int type, bool required) {
  return OpAttrSchema{name, attrKindFromOnnxType(type), type, required};
}

OpSchema merge(const std::vector<const OpSchema *> &vs) {
  OpSchema m = *vs.front();
  std::map<std::string_view, OpAttrSchema> attrs;
  std::map<std::string_view, size_t> count;
  for (const OpSchema *s : vs) {
    m.minInputs = std::min(m.minInputs, s->minInputs);
    m.maxInputs = std::max(m.maxInputs, s->maxInputs);
    m.minOutputs = std::min(m.minOutputs, s->minOutputs);
    m.maxOutputs = std::max(m.maxOutputs, s->maxOutputs);
    for (const OpAttrSchema &a : s->attrs) {
      bool required = a.required && (!attrs.count(a.name) || attrs[a.name].required);
      attrs[a.name] = a; // the newest version's kind wins
      attrs[a.name].required = required;
      ++count[a.name];
    }
  }
  m.deprecated = vs.back()->deprecated;
  m.attrs.clear();
  for (auto &[name, a] : attrs) {
    if (count[name] != vs.size()) a.required = false;
    m.attrs.push_back(a);
  }
  return m;
}

const Tables &tables() {
  static const Tables t = [] {
    Tables t;
    auto add = [&t](const char *op, OpSchema s) {
      if (auto k = opFromName(op)) {
        s.op = *k;
        std::sort(s.attrs.begin(), s.attrs.end(),
                  [](const OpAttrSchema &a, const OpAttrSchema &b) { return a.name < b.name; });
        t.versions[size_t(*k)].push_back(std::move(s));
      }
    };
#define COIL_ONNX_ATTR(name, type, required) makeAttr(name, type, required),
#define COIL_ONNX_SCHEMA(op, since, minIn, maxIn, minOut, maxOut, deprecated, ATTRS)               \
  add(op, OpSchema{OpKind::NumOps, since, minIn, maxIn, minOut, maxOut, deprecated, {ATTRS}});
#include "OnnxSchemas.inc"
#undef COIL_ONNX_SCHEMA
#undef COIL_ONNX_ATTR
    for (size_t k = 0; k < kNumOps; ++k) {
      auto &vs = t.versions[k];
      std::sort(vs.begin(), vs.end(),
                [](const OpSchema &a, const OpSchema &b) { return a.since < b.since; });
      // The versions in effect at kMinIrOpset and after.
      std::vector<const OpSchema *> inRange;
      for (size_t i = 0; i < vs.size(); ++i)
        if (vs[i].since >= kMinIrOpset ||
            (i + 1 < vs.size() ? vs[i + 1].since > kMinIrOpset : true))
          inRange.push_back(&vs[i]);
      if (!inRange.empty()) t.merged[k] = merge(inRange);
    }
    // coil's own attributes, which its passes set and the Graph IR text keeps.
    OpSchema &conv = *t.merged[size_t(OpKind::Conv)];
    conv.attrs.push_back(OpAttrSchema{kChannelsLastAttr, AttrKind::Int, 2, false});
    std::sort(conv.attrs.begin(), conv.attrs.end(),
              [](const OpAttrSchema &a, const OpAttrSchema &b) { return a.name < b.name; });
    return t;
  }();
  return t;
}

} // namespace

const OpAttrSchema *OpSchema::findAttr(std::string_view name) const {
  auto it = std::lower_bound(attrs.begin(), attrs.end(), name,
                             [](const OpAttrSchema &a, std::string_view n) { return a.name < n; });
  return it != attrs.end() && it->name == name ? &*it : nullptr;
}

int64_t newestOpset() {
  return COIL_ONNX_MAX_OPSET;
}

std::optional<AttrKind> attrKindFromOnnxType(int onnxType) {
  switch (onnxType) {
  case 1:
    return AttrKind::Float;
  case 2:
    return AttrKind::Int;
  case 3:
    return AttrKind::String;
  case 4:
    return AttrKind::Tensor;
  case 6:
    return AttrKind::Floats;
  case 7:
    return AttrKind::Ints;
  case 8:
    return AttrKind::Strings;
  default:
    return std::nullopt;
  }
}

bool attrKindAccepts(AttrKind expected, AttrKind actual) {
  if (expected == actual) return true;
  if (expected == AttrKind::Float && actual == AttrKind::Int) return true;
  return false;
}

const std::vector<OpSchema> &opSchemaVersions(OpKind op) {
  static const std::vector<OpSchema> none;
  return size_t(op) < kNumOps ? tables().versions[size_t(op)] : none;
}

const OpSchema *opSchema(OpKind op, int64_t opset) {
  const OpSchema *best = nullptr;
  for (const OpSchema &s : opSchemaVersions(op))
    if (s.since <= opset) best = &s;
  return best;
}

const OpSchema *irOpSchema(OpKind op) {
  if (size_t(op) >= kNumOps) return nullptr;
  const auto &m = tables().merged[size_t(op)];
  return m ? &*m : nullptr;
}

} // namespace coil
