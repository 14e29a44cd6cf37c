#include "ir/OpAttrs.h"

#include "ir/Infer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace coil {

namespace {

Error fail(const std::string &message) {
  return Error::user(message);
}

std::string count(size_t n) {
  return std::to_string(n);
}

} // namespace

// --- Sliding windows

Expected<size_t> spatialDims(int64_t rank) {
  if (rank < 3)
    return fail("input 0 must have rank >= 3 ([N, C, spatial...]), got rank " +
                std::to_string(rank));
  return size_t(rank - 2);
}

Status checkWeightRank(int64_t inputRank, int64_t weightRank) {
  if (weightRank != inputRank)
    return fail("weights must have rank " + std::to_string(inputRank) + ", got rank " +
                std::to_string(weightRank));
  return okStatus();
}

Expected<WindowAttrs> decodeWindow(const Node &n, size_t nd) {
  const Attrs &at = n.attrs;
  WindowAttrs w;
  w.nd = nd;
  w.group = at.getInt("group", 1);
  if (w.group < 1) return fail("group must be positive, got " + std::to_string(w.group));
  std::string ap = at.getString("auto_pad", "NOTSET");
  if (ap == "NOTSET")
    w.autoPad = AutoPad::NotSet;
  else if (ap == "SAME_UPPER")
    w.autoPad = AutoPad::SameUpper;
  else if (ap == "SAME_LOWER")
    w.autoPad = AutoPad::SameLower;
  else if (ap == "VALID")
    w.autoPad = AutoPad::Valid;
  else
    return fail("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + ap + "'");
  w.kernelShape = at.maybeInts("kernel_shape");
  w.strides = at.getInts("strides", std::vector<int64_t>(nd, 1));
  w.dilations = at.getInts("dilations", std::vector<int64_t>(nd, 1));
  w.padsGiven = at.has("pads");
  w.pads = at.getInts("pads", std::vector<int64_t>(2 * nd, 0));
  w.ceilMode = at.getInt("ceil_mode", 0) != 0;
  if (w.kernelShape && w.kernelShape->size() != nd)
    return fail("kernel_shape must have " + count(nd) + " values, got " +
                count(w.kernelShape->size()));
  if (w.strides.size() != nd)
    return fail("strides must have " + count(nd) + " values, got " + count(w.strides.size()));
  if (w.dilations.size() != nd)
    return fail("dilations must have " + count(nd) + " values, got " + count(w.dilations.size()));
  if (w.pads.size() != 2 * nd)
    return fail("pads must have " + count(2 * nd) + " values, got " + count(w.pads.size()));
  for (size_t i = 0; i < nd; ++i) {
    if (w.strides[i] < 1)
      return fail("strides must be positive, got " + std::to_string(w.strides[i]));
    if (w.dilations[i] < 1)
      return fail("dilations must be positive, got " + std::to_string(w.dilations[i]));
  }
  for (int64_t p : w.pads)
    if (p < 0) return fail("pads must be non-negative, got " + std::to_string(p));
  w.outputPadding = at.getInts("output_padding", std::vector<int64_t>(nd, 0));
  if (w.outputPadding.size() < nd)
    return fail("output_padding must have " + count(nd) + " values, got " +
                count(w.outputPadding.size()));
  w.outputShape = at.maybeInts("output_shape");
  if (w.outputShape && w.outputShape->size() < nd)
    return fail("output_shape must have " + count(nd) + " values, got " +
                count(w.outputShape->size()));
  w.countIncludePad = at.getInt("count_include_pad", 0) != 0;
  w.storageOrder = at.getInt("storage_order", 0);
  if (w.storageOrder != 0 && w.storageOrder != 1)
    return fail("storage_order must be 0 or 1, got " + std::to_string(w.storageOrder));
  w.p = at.getInt("p", 2);
  return w;
}

Expected<WindowAttrs> decodePoolWindow(const Node &n, size_t nd) {
  if (!n.attrs.has("kernel_shape")) return fail("attribute kernel_shape is required");
  return decodeWindow(n, nd);
}

SymInt samePadBegin(const WindowAttrs &w, size_t i, const SymInt &in, const SymInt &k,
                    const SymInt &out) {
  SymInt span = (k - 1) * w.dilations[i] + 1;
  SymInt total = max(SymInt(0), (out - 1) * w.strides[i] + span - in);
  SymInt half = floorDiv(total, SymInt(2));
  return w.autoPad == AutoPad::SameUpper ? half : total - half;
}

Expected<WindowDim> windowDim(const WindowAttrs &w, size_t i, const SymInt &in, const SymInt &k) {
  if (k.isConstant() && k.constant() < 1)
    return fail("kernel sizes must be positive, got " + k.str());
  int64_t s = w.strides[i];
  SymInt span = (k - 1) * w.dilations[i] + 1;
  WindowDim r{SymInt(0), SymInt(0), SymInt(0)};
  switch (w.autoPad) {
  case AutoPad::SameUpper:
  case AutoPad::SameLower: {
    r.out = ceilDiv(in, s);
    r.padBegin = samePadBegin(w, i, in, k, r.out);
    SymInt total = max(SymInt(0), (r.out - 1) * s + span - in);
    r.padEnd = total - r.padBegin;
    break;
  }
  case AutoPad::Valid:
    r.out = w.ceilMode ? ceilDiv(in - span, s) + 1 : floorDiv(in - span, s) + 1;
    break;
  case AutoPad::NotSet: {
    r.padBegin = w.pads[i];
    r.padEnd = w.pads[i + w.nd];
    SymInt num = in + r.padBegin + r.padEnd - span;
    if (w.ceilMode) // the last window must start inside the input or the begin padding
      r.out = min(ceilDiv(num, s) + 1, ceilDiv(in + r.padBegin, s));
    else
      r.out = floorDiv(num, s) + 1;
    break;
  }
  }
  if (r.out.isConstant() && r.out.constant() < 0)
    return fail("spatial dim " + std::to_string(i) + " of size " + in.str() +
                " is smaller than the window (" + span.str() + ") plus padding");
  return r;
}

Expected<WindowDim> convTransposeDim(const WindowAttrs &w, size_t i, const SymInt &in,
                                     const SymInt &k) {
  size_t nd = w.nd;
  if (k.isConstant() && k.constant() < 1)
    return fail("kernel sizes must be positive, got " + k.str());
  SymInt full = (in - 1) * w.strides[i] + w.outputPadding[i] + (k - 1) * w.dilations[i] + 1;
  std::optional<SymInt> given;
  if (w.outputShape) given = SymInt((*w.outputShape)[w.outputShape->size() - nd + i]);
  WindowDim r{SymInt(0), SymInt(0), SymInt(0)};
  if (w.same() && !w.padsGiven) {
    r.out = given ? *given : in * w.strides[i];
    SymInt total = full - r.out, half = floorDiv(total, SymInt(2));
    r.padBegin = w.autoPad == AutoPad::SameUpper ? half : total - half;
    r.padEnd = total - r.padBegin;
    return r;
  }
  r.padBegin = w.pads[i];
  r.padEnd = w.pads[i + nd];
  r.out = given ? *given : full - w.pads[i] - w.pads[i + nd];
  if (r.out.isConstant() && r.out.constant() < 0)
    return fail("output spatial dim " + std::to_string(i) + " would be negative (" + r.out.str() +
                ")");
  return r;
}

SymInt unpoolDim(const WindowAttrs &w, size_t i, const SymInt &in) {
  return (in - 1) * w.strides[i] - w.pads[i] - w.pads[i + w.nd] + (*w.kernelShape)[i];
}

// --- Einsum

namespace {

/// One side of an equation: terms of label codes, -1 for the ellipsis.
Expected<std::vector<std::vector<int>>> parseEinsumSide(const std::string &s) {
  std::vector<std::vector<int>> terms(1);
  for (size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    if (ch == ' ') continue;
    if (ch == ',') {
      terms.emplace_back();
    } else if (ch == '.') {
      auto &t = terms.back();
      if (s.compare(i, 3, "...") != 0 || std::find(t.begin(), t.end(), -1) != t.end())
        return fail("malformed ellipsis in einsum equation '" + s + "'");
      t.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      terms.back().push_back(int(static_cast<unsigned char>(ch)));
    } else {
      return fail(std::string("invalid character '") + ch + "' in einsum equation");
    }
  }
  return terms;
}

} // namespace

Expected<EinsumEquation> decodeEinsum(const Node &n, size_t numInputs) {
  std::string eq = n.attrs.getString("equation", "");
  size_t arrow = eq.find("->");
  EinsumEquation e;
  COIL_TRY(e.inputs, parseEinsumSide(eq.substr(0, arrow)));
  if (e.inputs.size() != numInputs)
    return fail("einsum equation has " + count(e.inputs.size()) + " operands, got " +
                count(numInputs) + " inputs");
  if (arrow != std::string::npos) {
    COIL_TRY(auto outs, parseEinsumSide(eq.substr(arrow + 2)));
    if (outs.size() != 1) return fail("einsum output must be a single term");
    e.output = outs[0];
  }
  return e;
}

std::string einsumLabelName(int l) {
  return l >= 1000 || l < 0 ? std::string("...") : std::string(1, char(l));
}

Expected<EinsumLabels> einsumLabels(const EinsumEquation &eq, const std::vector<size_t> &ranks) {
  size_t nIn = eq.inputs.size(), ellRank = 0;
  std::vector<size_t> named(nIn, 0);
  for (size_t t = 0; t < nIn; ++t) {
    bool ell = false;
    for (int l : eq.inputs[t]) l == -1 ? (void)(ell = true) : (void)++named[t];
    size_t r = ranks[t];
    if (r < named[t] || (!ell && r != named[t]))
      return fail("einsum operand " + count(t) + " has rank " + count(r) + ", the equation names " +
                  count(named[t]) + " dims");
    if (ell) ellRank = std::max(ellRank, r - named[t]);
  }
  EinsumLabels L;
  L.operands.resize(nIn);
  std::set<int> all;
  for (size_t t = 0; t < nIn; ++t) {
    size_t ne = ranks[t] - named[t];
    for (int l : eq.inputs[t]) {
      if (l == -1)
        for (size_t j = 0; j < ne; ++j) L.operands[t].push_back(int(1000 + ellRank - ne + j));
      else
        L.operands[t].push_back(l);
    }
    all.insert(L.operands[t].begin(), L.operands[t].end());
  }
  if (eq.output) {
    std::set<int> seen;
    for (int l : *eq.output) {
      if (l == -1) {
        for (size_t j = 0; j < ellRank; ++j) L.output.push_back(int(1000 + j));
        continue;
      }
      if (!seen.insert(l).second)
        return fail("einsum output repeats dim '" + einsumLabelName(l) +
                    "' (a diagonal output is not defined)");
      if (!all.count(l))
        return fail("einsum output dim '" + einsumLabelName(l) + "' appears in no input");
      L.output.push_back(l);
    }
  } else {
    std::map<int, int> uses;
    for (auto &t : eq.inputs)
      for (int l : t)
        if (l != -1) ++uses[l];
    for (size_t j = 0; j < ellRank; ++j) L.output.push_back(int(1000 + j));
    for (auto &[l, c] : uses) // by code: upper case before lower case
      if (c == 1) L.output.push_back(l);
  }
  for (int l : all)
    if (std::find(L.output.begin(), L.output.end(), l) == L.output.end()) L.summed.push_back(l);
  return L;
}

// --- Recurrent cells

const std::vector<std::string> &rnnActivationNames() {
  static const std::vector<std::string> names{
      "Tanh",       "Sigmoid",     "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
      "ScaledTanh", "HardSigmoid", "Elu",  "Softsign", "Softplus"};
  return names;
}

int64_t rnnActivationCode(const std::string &name) {
  const auto &names = rnnActivationNames();
  return std::find(names.begin(), names.end(), name) - names.begin();
}

Expected<RnnAttrs> decodeRnn(const Node &n) {
  const Attrs &at = n.attrs;
  RnnAttrs a;
  a.cell = n.op == OpKind::GRU ? RnnCell::Gru : n.op == OpKind::LSTM ? RnnCell::Lstm : RnnCell::Rnn;
  a.gates = a.cell == RnnCell::Rnn ? 1 : a.cell == RnnCell::Gru ? 3 : 4;
  a.direction = at.getString("direction", "forward");
  if (a.direction != "forward" && a.direction != "reverse" && a.direction != "bidirectional")
    return fail("direction must be forward, reverse or bidirectional, got '" + a.direction + "'");
  a.dirs = a.direction == "bidirectional" ? 2 : 1;
  a.hiddenSize = at.maybeInt("hidden_size");
  a.layout = at.getInt("layout", 0);
  if (at.has("clip")) a.clip = at.getFloat("clip", 0.0);
  a.linearBeforeReset = at.getInt("linear_before_reset", 0) != 0;
  a.inputForget = at.getInt("input_forget", 0) != 0;
  std::vector<std::string> names;
  if (at.has("activations")) names = at.getStrings("activations");
  size_t per = a.cell == RnnCell::Rnn ? 1 : a.cell == RnnCell::Gru ? 2 : 3;
  if (names.empty()) {
    for (int64_t d = 0; d < a.dirs; ++d) {
      names.push_back(a.cell == RnnCell::Rnn ? "Tanh" : "Sigmoid");
      for (size_t k = 1; k < per; ++k) names.push_back("Tanh");
    }
  }
  if (names.size() == per && a.dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * size_t(a.dirs))
    return fail("activations must list " + count(per * size_t(a.dirs)) + " functions, got " +
                count(names.size()));
  auto alphas = at.getFloats("activation_alpha");
  auto betas = at.getFloats("activation_beta");
  const auto &known = rnnActivationNames();
  for (size_t i = 0; i < names.size(); ++i) {
    RnnActivation f;
    f.name = names[i];
    if (std::find(known.begin(), known.end(), f.name) == known.end())
      return fail("unsupported activation '" + f.name + "'");
    double da = f.name == "LeakyRelu" ? 0.01 : f.name == "HardSigmoid" ? 0.2 : 1.0;
    double db = f.name == "HardSigmoid" ? 0.5 : f.name == "ScaledTanh" ? 1.0 : 0.0;
    f.alpha = i < alphas.size() ? alphas[i] : da;
    f.beta = i < betas.size() ? betas[i] : db;
    a.activations.push_back(f);
  }
  return a;
}

// --- Resize

Expected<ResizeAttrs> decodeResize(const Node &n, int64_t rank) {
  const Attrs &at = n.attrs;
  ResizeAttrs a;
  if (auto ax = at.maybeInts("axes")) {
    for (int64_t v : *ax) {
      COIL_TRY(int64_t k, normalizeAxis(v, rank, "axes"));
      if (std::find(a.axes.begin(), a.axes.end(), k) != a.axes.end())
        return fail("axes must not repeat, got " + std::to_string(v) + " twice");
      a.axes.push_back(k);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) a.axes.push_back(i);
  }
  a.mode = at.getString("mode", "nearest");
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return fail("mode must be nearest, linear or cubic, got '" + a.mode + "'");
  a.policy = at.getString("keep_aspect_ratio_policy", "stretch");
  if (a.policy != "stretch" && a.policy != "not_larger" && a.policy != "not_smaller")
    return fail("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '" +
                a.policy + "'");
  a.coordMode = at.getString("coordinate_transformation_mode", "half_pixel");
  a.nearestMode = at.getString("nearest_mode", "round_prefer_floor");
  a.cubicA = at.getFloat("cubic_coeff_a", -0.75);
  a.extrapolation = at.getFloat("extrapolation_value", 0.0);
  a.excludeOutside = at.getInt("exclude_outside", 0) != 0;
  a.antialias = at.getInt("antialias", 0) != 0 && a.mode != "nearest";
  return a;
}

// --- DepthToSpace, SpaceToDepth

Expected<BlockAttrs> decodeBlock(const Node &n) {
  BlockAttrs a;
  a.blocksize = n.attrs.getInt("blocksize", 0);
  if (a.blocksize < 1)
    return fail("blocksize must be positive, got " + std::to_string(a.blocksize));
  std::string mode = n.attrs.getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return fail("mode must be DCR or CRD, got '" + mode + "'");
  a.crd = mode == "CRD";
  return a;
}

Expected<Tensor> decodeConstant(const Node &n) {
  const Attrs &a = n.attrs;
  if (auto t = a.getTensor("value")) return *t;
  if (a.has("value_float")) return Tensor::scalar(DType::F32, a.getFloat("value_float", 0));
  if (auto v = a.maybeInt("value_int")) return Tensor::fromInts(DType::I64, {}, {*v});
  if (a.has("value_floats")) {
    auto f = a.getFloats("value_floats");
    return Tensor::fromDoubles(DType::F32, {int64_t(f.size())}, f);
  }
  if (a.has("value_ints")) {
    auto v = a.getInts("value_ints");
    return Tensor::fromInts(DType::I64, {int64_t(v.size())}, v);
  }
  return fail("constant needs one of value, value_float, value_floats, value_int, value_ints");
}

// --- GridSample, RoiAlign

Expected<GridSampleAttrs> decodeGridSample(const Node &n) {
  GridSampleAttrs a;
  a.mode = n.attrs.getString("mode", "linear");
  a.padding = n.attrs.getString("padding_mode", "zeros");
  if (a.mode == "bilinear") a.mode = "linear";
  if (a.mode == "bicubic") a.mode = "cubic";
  if (a.mode != "linear" && a.mode != "nearest" && a.mode != "cubic")
    return fail("mode must be linear, nearest or cubic, got '" + a.mode + "'");
  if (a.padding != "zeros" && a.padding != "border" && a.padding != "reflection")
    return fail("padding_mode must be zeros, border or reflection, got '" + a.padding + "'");
  a.alignCorners = n.attrs.getInt("align_corners", 0) != 0;
  return a;
}

Expected<RoiAlignAttrs> decodeRoiAlign(const Node &n) {
  const Attrs &at = n.attrs;
  RoiAlignAttrs a;
  a.outHeight = at.getInt("output_height", 1);
  a.outWidth = at.getInt("output_width", 1);
  a.samplingRatio = at.getInt("sampling_ratio", 0);
  a.spatialScale = at.getFloat("spatial_scale", 1.0);
  a.max = at.getString("mode", "avg") == "max";
  a.halfPixel = at.getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  if (a.outHeight < 1 || a.outWidth < 1)
    return fail("output_height and output_width must be positive");
  return a;
}

// --- Pad, CenterCropPad

Expected<PadMode> decodePadMode(const Node &n) {
  std::string mode = n.attrs.getString("mode", "constant");
  for (PadMode m : {PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap})
    if (mode == padModeName(m)) return m;
  return fail("mode must be one of constant, reflect, edge, wrap, got '" + mode + "'");
}

const char *padModeName(PadMode m) {
  static const char *const kNames[] = {"constant", "reflect", "edge", "wrap"};
  return kNames[int(m)];
}

Expected<std::vector<int64_t>> distinctAxes(const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : axes) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank || seen[size_t(d)]) {
      std::string list;
      for (int64_t v : axes) list += (list.empty() ? "" : ", ") + std::to_string(v);
      return fail("axes must be distinct axes in [" + std::to_string(-rank) + ", " +
                  std::to_string(rank - 1) + "], got [" + list + "]");
    }
    seen[size_t(d)] = true;
    out.push_back(d);
  }
  return out;
}

Expected<std::vector<int64_t>> decodeCenterCropAxes(const Node &n, int64_t rank) {
  if (auto a = n.attrs.maybeInts("axes")) return distinctAxes(*a, rank);
  std::vector<int64_t> all;
  for (int64_t d = 0; d < rank; ++d) all.push_back(d);
  return all;
}

// --- Reductions

Expected<ReduceAttrs> decodeReduce(const Node &n) {
  ReduceAttrs a;
  a.keepdims = n.attrs.getInt("keepdims", 1) != 0;
  a.noopWithEmptyAxes = n.attrs.getInt("noop_with_empty_axes", 0) != 0;
  a.axes = n.attrs.maybeInts("axes");
  return a;
}

} // namespace coil
