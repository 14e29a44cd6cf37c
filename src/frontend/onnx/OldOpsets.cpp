// Conversions of ONNX nodes of opsets 7..12 to their opset-13 form (see OldOpsets.h).
//
// Every op whose version in effect at some opset in 7..12 differs from its version at opset 13
// was checked against the schema history of the onnx package. Those that need a conversion
// have a function below (the table `kConversions` at the end lists them). The others need
// none, for these reasons:
//  - only type sets widened (bf16, integer or string types added): Abs, Add, Sub, Mul, Div,
//    Ceil, Floor, Exp, Log, Neg, Reciprocal, Relu, Sigmoid, Sqrt, Tanh, Cast, Concat (also
//    negative axes), Constant (value_* attributes added at 12), Conv, Equal, Greater, Less, Erf,
//    Expand, Flatten (negative axis at 11), Gather, GatherElements, ScatterElements, ScatterND,
//    Gemm (C optional from 11), IsNaN, LRN, MatMul, Mod, Pow, PRelu, Reshape, Shape, Size,
//    Sign, SpaceToDepth, Tile, Transpose, Where, NonZero, MeanVarianceNormalization, Compress,
//    MaxUnpool, LpPool, NonMaxSuppression, Identity, Shrink, QuantizeLinear and
//    DequantizeLinear (axis added at 13; per-tensor scales before), NegativeLogLikelihoodLoss,
//    SoftmaxCrossEntropyLoss, ConstantOfShape, EyeLike, Acosh/Asinh/Atanh/Cosh/Sinh;
//  - Max, Min, Sum, Mean of version 6 (opset 7) require equal shapes: a special case of the
//    multidirectional broadcasting of version 8;
//  - attributes added whose default is the old behaviour: ArgMax/ArgMin (select_last_index at
//    12), MaxPool (storage_order and the Indices output at 8, ceil_mode and dilations at 10),
//    AveragePool (ceil_mode at 10), DepthToSpace (mode DCR at 11), GatherND (batch_dims at
//    12), TopK version 10 (largest, sorted at 11), Reduce* other than ReduceSum (negative axes
//    at 11; the axes stay an attribute until opset 18);
//  - Resize version 11: the same as version 13 except that roi and scales are required inputs,
//    and coil treats an empty roi or scales as absent;
//  - OneHot version 9 gives indices outside [0, depth) all off_value where version 11 wraps
//    negative indices, and ConvTranspose version 1 documents SAME_UPPER padding the other way
//    round from version 11: onnxruntime runs both like their new versions (checked with
//    onnxruntime 1.23), so coil does too;
//  - Loop, If, Scan: coil does not support control flow at any opset.
// Upsample at opsets 10..12 and Scatter at 11..12 are deprecated schemas that onnxruntime does
// not run either; the importer reports them as deprecated.
#include "frontend/onnx/OldOpsets.h"

#include "support/Check.h"

#include <cmath>
#include <cstring>
#include <map>

namespace coil {

namespace {

using NodeList = std::vector<onnx::NodeProto>;

std::string versionText(const onnx::NodeProto &n, int64_t since) {
  return "version " + std::to_string(since) + " of " + n.op_type();
}

/// "...; re-export the model with opset >= 13 or convert it with onnx.version_converter"
Error unsupportedForm(const onnx::NodeProto &n, int64_t since, const UpgradeContext &ctx,
                      const std::string &what) {
  return Error::user("opset " + std::to_string(ctx.opset) + " form (" + versionText(n, since) +
                     ") " + what +
                     " is not supported; re-export the model with opset >= 13 or convert it "
                     "with onnx.version_converter");
}

const onnx::AttributeProto *findAttr(const onnx::NodeProto &n, const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t intAttr(const onnx::NodeProto &n, const std::string &name, int64_t def) {
  const auto *a = findAttr(n, name);
  return a ? a->i() : def;
}

float floatAttr(const onnx::NodeProto &n, const std::string &name, float def) {
  const auto *a = findAttr(n, name);
  return a ? a->f() : def;
}

std::string stringAttr(const onnx::NodeProto &n, const std::string &name, const std::string &def) {
  const auto *a = findAttr(n, name);
  return a ? a->s() : def;
}

std::optional<std::vector<int64_t>> intsAttr(const onnx::NodeProto &n, const std::string &name) {
  const auto *a = findAttr(n, name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

void setIntAttr(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void setStringAttr(onnx::NodeProto &n, const std::string &name, const std::string &v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

/// `n` without the attributes named in `drop`.
onnx::NodeProto without(const onnx::NodeProto &n, std::initializer_list<const char *> drop) {
  onnx::NodeProto out = n;
  out.clear_attribute();
  for (const auto &a : n.attribute()) {
    bool dropped = false;
    for (const char *d : drop) dropped = dropped || a.name() == d;
    if (!dropped) *out.add_attribute() = a;
  }
  return out;
}

/// The onnx TensorProto.DataType code of a coil dtype.
int32_t onnxCodeOf(DType dt) {
  for (int32_t code = 1; code <= 32; ++code)
    if (dtypeFromOnnxCode(code) == dt) return code;
  COIL_CHECK(false) << "dtype " << dtypeName(dt) << " has no onnx code";
  return 0;
}

/// Collects the replacement nodes of one node; helper nodes and constants carry its name.
class Emitter {
public:
  Emitter(const onnx::NodeProto &n, const UpgradeContext &ctx) : n_(n), ctx_(ctx) {}

  /// A node of op `op` named like the converted node.
  onnx::NodeProto &node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs) {
    onnx::NodeProto &m = nodes_.emplace_back();
    m.set_op_type(op);
    m.set_name(displayName());
    for (const auto &i : ins) m.add_input(i);
    for (const auto &o : outs) m.add_output(o);
    return m;
  }
  /// Adds `m` (a converted copy of the node).
  void add(onnx::NodeProto m) { nodes_.push_back(std::move(m)); }
  /// A Constant node holding `t`; returns its output's name.
  std::string constant(const std::string &hint, const Tensor &t) {
    std::string name = fresh(hint);
    onnx::NodeProto &c = node("Constant", {}, {name});
    auto *a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *tp = a->mutable_t();
    tp->set_name(name);
    tp->set_data_type(onnxCodeOf(t.dtype()));
    for (int64_t d : t.shape()) tp->add_dims(d);
    tp->set_raw_data(t.data(), t.nbytes());
    return name;
  }
  std::string ints(const std::string &hint, const std::vector<int64_t> &v) {
    return constant(hint, Tensor::fromInts(DType::I64, {int64_t(v.size())}, v));
  }
  std::string fresh(const std::string &hint) { return ctx_.freshName(displayName() + "_" + hint); }
  NodeList take() { return std::move(nodes_); }

private:
  std::string displayName() const {
    return n_.name().empty() && n_.output_size() ? n_.output(0) : n_.name();
  }
  const onnx::NodeProto &n_;
  const UpgradeContext &ctx_;
  NodeList nodes_;
};

Expected<TensorType> inputType(const onnx::NodeProto &n, int i, const UpgradeContext &ctx) {
  if (i >= n.input_size() || n.input(i).empty())
    return Error::user("input " + std::to_string(i) + " is missing");
  auto t = ctx.typeOf(n.input(i));
  COIL_CHECK(t) << "no type for imported value '" << n.input(i) << "'";
  return *t;
}

bool hasOutput(const onnx::NodeProto &n, int i) {
  return i < n.output_size() && !n.output(i).empty();
}

// --- the conversions

/// Softmax, LogSoftmax, Hardmax before version 13: the input is coerced to 2-D,
/// [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}] at `axis` (default 1), and the op runs over the
/// second dimension, that is over all dims from `axis` on together. From version 13 it runs
/// over the one dim `axis` (default -1). Where `axis` is the last dim the two agree and the node
/// keeps its op with that axis; otherwise Flatten(axis) -> op(axis 1) -> Reshape(Shape(input))
/// computes the old semantics.
Expected<NodeList> upgradeSoftmax(const onnx::NodeProto &n, int64_t since,
                                  const UpgradeContext &ctx) {
  COIL_TRY(TensorType x, inputType(n, 0, ctx));
  int64_t r = x.rank(), axis = intAttr(n, "axis", 1);
  if (axis < -r || axis >= r)
    return Error::user("axis " + std::to_string(axis) + " is out of range for an input of rank " +
                       std::to_string(r) + " (" + versionText(n, since) + ")");
  if (axis < 0) axis += r;
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"axis"});
  if (axis == r - 1) {
    setIntAttr(op, "axis", axis);
    e.add(op);
    return e.take();
  }
  std::string shape = e.fresh("shape"), flat = e.fresh("flat"), y = e.fresh("2d");
  e.node("Shape", {n.input(0)}, {shape});
  setIntAttr(e.node("Flatten", {n.input(0)}, {flat}), "axis", axis);
  op.set_input(0, flat);
  op.set_output(0, y);
  setIntAttr(op, "axis", 1);
  e.add(op);
  e.node("Reshape", {y, shape}, {n.output(0)});
  return e.take();
}

/// Upsample (versions 7 and 9; the scales are an attribute at 7 and an input at 9) and Resize
/// version 10 read output coordinate x at input coordinate x / scale (what Resize-13 calls
/// coordinate_transformation_mode 'asymmetric'), with output sizes floor(size * scale).
/// Their nearest mode does not say how x / scale becomes an index; onnxruntime, against which
/// models of these opsets were validated, truncates it where scale >= 1 and rounds it up where
/// scale < 1, per axis. That is Resize-13's nearest_mode 'floor' (x / scale >= 0) or 'ceil'.
/// With scales known at import, an input with axes scaled both ways becomes two Resizes, one
/// per rounding, each scaling its own axes (nearest sampling is separable by axis, so the
/// composition is exact); with scales known only at run time, Resize-10 becomes
/// Resize(Max(scales, 1), floor) then Resize(Min(scales, 1), ceil), the same composition
/// (Upsample's scales are >= 1 by its definition: one Resize, floor). Linear mode, and cubic,
/// which onnxruntime accepts as well, convert with the scales as they are.
Expected<NodeList> upgradeUpsample(const onnx::NodeProto &n, int64_t since,
                                   const UpgradeContext &ctx) {
  COIL_TRY(TensorType x, inputType(n, 0, ctx));
  std::string mode = stringAttr(n, "mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return unsupportedForm(n, since, ctx, "with mode '" + mode + "'");
  Emitter e(n, ctx);
  std::optional<std::vector<double>> scales;
  std::string scalesName;
  bool attrScales = n.op_type() == "Upsample" && since < 9;
  if (attrScales) {
    const auto *a = findAttr(n, "scales");
    COIL_CHECK(a) << "validated Upsample without scales";
    scales = std::vector<double>(a->floats().begin(), a->floats().end());
  } else {
    scalesName = n.input(1); // required (validated)
    if (auto t = ctx.constantOf(scalesName)) scales = t->toDoubles();
  }
  if (scales && int64_t(scales->size()) != x.rank())
    return Error::user("scales must have " + std::to_string(x.rank()) +
                       " values (the input's rank), got " + std::to_string(scales->size()));
  auto scalesConst = [&](const std::vector<double> &s) {
    return e.constant("scales", Tensor::fromDoubles(DType::F32, {int64_t(s.size())}, s));
  };
  auto resize = [&](const std::string &in, const std::string &sc, const std::string &out,
                    const char *nearestMode) {
    onnx::NodeProto &r = e.node("Resize", {in, "", sc}, {out});
    setStringAttr(r, "mode", mode);
    setStringAttr(r, "coordinate_transformation_mode", "asymmetric");
    if (nearestMode) setStringAttr(r, "nearest_mode", nearestMode);
  };
  if (mode != "nearest") {
    resize(n.input(0), attrScales ? scalesConst(*scales) : scalesName, n.output(0), nullptr);
    return e.take();
  }
  if (!scales && n.op_type() == "Upsample") {
    resize(n.input(0), scalesName, n.output(0), "floor");
    return e.take();
  }
  if (!scales) {
    std::string one = e.constant("one", Tensor::fromDoubles(DType::F32, {1}, {1.0}));
    std::string up = e.fresh("scales_up"), down = e.fresh("scales_down"),
                mid = e.fresh("upsampled");
    e.node("Max", {scalesName, one}, {up});
    e.node("Min", {scalesName, one}, {down});
    resize(n.input(0), up, mid, "floor");
    resize(mid, down, n.output(0), "ceil");
    return e.take();
  }
  std::vector<double> up(scales->size(), 1.0), down(scales->size(), 1.0);
  bool anyUp = false, anyDown = false;
  for (size_t i = 0; i < scales->size(); ++i) {
    double s = double(float((*scales)[i]));
    if (!(s > 0) || !std::isfinite(s))
      return Error::user("scales must be positive, got " + std::to_string((*scales)[i]));
    if (s >= 1) {
      up[i] = (*scales)[i];
      anyUp = anyUp || s > 1;
    } else {
      down[i] = (*scales)[i];
      anyDown = true;
    }
  }
  if (!anyDown) {
    resize(n.input(0), attrScales ? scalesConst(*scales) : scalesName, n.output(0), "floor");
  } else if (!anyUp) {
    resize(n.input(0), attrScales ? scalesConst(*scales) : scalesName, n.output(0), "ceil");
  } else {
    std::string mid = e.fresh("upsampled");
    resize(n.input(0), scalesConst(up), mid, "floor");
    resize(mid, scalesConst(down), n.output(0), "ceil");
  }
  return e.take();
}

/// Slice version 1 (opsets 1..9) takes starts, ends and axes as attributes; from version 10
/// they are inputs (with steps). The attributes become constant inputs.
Expected<NodeList> upgradeSlice(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"starts", "ends", "axes"});
  op.add_input(e.ints("starts", intsAttr(n, "starts").value_or(std::vector<int64_t>{})));
  op.add_input(e.ints("ends", intsAttr(n, "ends").value_or(std::vector<int64_t>{})));
  if (auto axes = intsAttr(n, "axes")) op.add_input(e.ints("axes", *axes));
  e.add(op);
  return e.take();
}

/// Squeeze and Unsqueeze before version 13, ReduceSum before version 13: `axes` is an
/// attribute; from version 13 it is an input. It becomes a constant input (omitted where the
/// attribute is absent or empty: Squeeze then removes every dim of size 1 and ReduceSum
/// reduces every dim, as before).
Expected<NodeList> upgradeAxesToInput(const onnx::NodeProto &n, int64_t,
                                      const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"axes"});
  auto axes = intsAttr(n, "axes");
  bool keepEmpty = n.op_type() == "Unsqueeze"; // required there; inference reports it empty
  if (axes && (!axes->empty() || keepEmpty)) op.add_input(e.ints("axes", *axes));
  e.add(op);
  return e.take();
}

/// Split before version 13 takes the part lengths as attribute `split`; from version 13 it is
/// an input. It becomes a constant input.
Expected<NodeList> upgradeSplit(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"split"});
  if (auto split = intsAttr(n, "split")) op.add_input(e.ints("split", *split));
  e.add(op);
  return e.take();
}

/// Pad version 2 (opsets 2..10) takes `pads` and the float `value` as attributes; from
/// version 11 they are the inputs pads (int64) and constant_value (of the data's type).
Expected<NodeList> upgradePad(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  COIL_TRY(TensorType x, inputType(n, 0, ctx));
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"pads", "value"});
  op.add_input(e.ints("pads", intsAttr(n, "pads").value_or(std::vector<int64_t>{})));
  if (findAttr(n, "value") && stringAttr(n, "mode", "constant") == "constant")
    op.add_input(e.constant("value", Tensor::scalar(x.dtype, floatAttr(n, "value", 0))));
  e.add(op);
  return e.take();
}

/// Clip version 6 (opsets 6..10) takes `min` and `max` as float attributes; from version 11
/// they are optional inputs of the input's type. An absent bound stays absent: version 6
/// defaults it to the float limits, version 11 to the limits of the type (which differ only
/// for f64 values beyond the float range).
Expected<NodeList> upgradeClip(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  COIL_TRY(TensorType x, inputType(n, 0, ctx));
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"min", "max"});
  bool hasMin = findAttr(n, "min"), hasMax = findAttr(n, "max");
  if (hasMin || hasMax)
    op.add_input(hasMin ? e.constant("min", Tensor::scalar(x.dtype, floatAttr(n, "min", 0)))
                        : std::string());
  if (hasMax) op.add_input(e.constant("max", Tensor::scalar(x.dtype, floatAttr(n, "max", 0))));
  e.add(op);
  return e.take();
}

/// TopK version 1 (opsets 1..9) takes `k` as an attribute; from version 10 it is the input K
/// (a 1-D int64 tensor of one value).
Expected<NodeList> upgradeTopK(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"k"});
  op.add_input(e.ints("k", {intAttr(n, "k", 0)}));
  e.add(op);
  return e.take();
}

/// Dropout versions 7 and 10 (opsets 7..11) have no training mode (their `ratio` attribute
/// only matters in training): they copy the input, like a Dropout of version 12 or later
/// without training_mode. Their mask output means what it means for the new versions:
/// nothing is dropped, so it is all true (bool at version 10) or all ones (the input's type at
/// version 7). The spec leaves the mask unfilled at inference; onnxruntime writes all false
/// (zeros) there for these versions, and all true for version 12 and later.
Expected<NodeList> upgradeDropout(const onnx::NodeProto &n, int64_t since,
                                  const UpgradeContext &ctx) {
  COIL_TRY(TensorType x, inputType(n, 0, ctx));
  Emitter e(n, ctx);
  onnx::NodeProto op = without(n, {"ratio"});
  if (since >= 10 || !hasOutput(n, 1)) {
    e.add(op);
    return e.take();
  }
  op.mutable_output()->RemoveLast();
  e.add(op);
  std::string shape = e.fresh("shape");
  e.node("Shape", {n.input(0)}, {shape});
  onnx::NodeProto &ones = e.node("ConstantOfShape", {shape}, {n.output(1)});
  auto *a = ones.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  Tensor one = Tensor::fromDoubles(x.dtype, {1}, {1.0});
  a->mutable_t()->set_data_type(onnxCodeOf(x.dtype));
  a->mutable_t()->add_dims(1);
  a->mutable_t()->set_raw_data(one.data(), one.nbytes());
  return e.take();
}

/// BatchNormalization versions 7 and 9 (opsets 7..13). Version 7 has `spatial` (default 1):
/// spatial=1 is the per-channel normalization of version 9; spatial=0 normalizes per
/// activation, with scale, B, mean and var of shape [C, D1, ..., Dn], which becomes
/// (X - mean) / Sqrt(var + epsilon) * scale + B with those broadcast over the batch dim.
/// Both versions are in training mode when the node has more than one output (Y, running
/// mean, running var, saved mean, saved var); with the first three outputs only that is
/// version 14's training_mode=1 (the same momentum rule). The schema asks for all five
/// outputs in training mode, though, and what saved_var holds is ambiguous (the variance per
/// the spec, the inverse standard deviation in onnxruntime): version 14 dropped them, and they
/// are not supported.
Expected<NodeList> upgradeBatchNorm(const onnx::NodeProto &n, int64_t since,
                                    const UpgradeContext &ctx) {
  bool training = hasOutput(n, 1) || hasOutput(n, 2) || hasOutput(n, 3) || hasOutput(n, 4);
  if (hasOutput(n, 3) || hasOutput(n, 4))
    return unsupportedForm(n, since, ctx,
                           "in training mode (with the outputs saved_mean and saved_var, which "
                           "implementations fill differently)");
  Emitter e(n, ctx);
  if (since < 9 && intAttr(n, "spatial", 1) == 0) {
    if (training) return unsupportedForm(n, since, ctx, "with spatial=0 in training mode");
    COIL_TRY(TensorType var, inputType(n, 4, ctx));
    std::string centered = e.fresh("centered"), shifted = e.fresh("var_eps"),
                stddev = e.fresh("stddev"), normed = e.fresh("normalized"),
                scaled = e.fresh("scaled");
    std::string eps =
        e.constant("epsilon", Tensor::scalar(var.dtype, floatAttr(n, "epsilon", 1e-5f)));
    e.node("Sub", {n.input(0), n.input(3)}, {centered});
    e.node("Add", {n.input(4), eps}, {shifted});
    e.node("Sqrt", {shifted}, {stddev});
    e.node("Div", {centered, stddev}, {normed});
    e.node("Mul", {normed, n.input(1)}, {scaled});
    e.node("Add", {scaled, n.input(2)}, {n.output(0)});
    return e.take();
  }
  onnx::NodeProto op = without(n, {"spatial"});
  if (training) {
    setIntAttr(op, "training_mode", 1);
    while (op.output_size() > 3) op.mutable_output()->RemoveLast();
  }
  e.add(op);
  return e.take();
}

/// Scatter version 9 (opsets 9, 10) is ScatterElements of version 11 under its old name.
Expected<NodeList> upgradeScatter(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = n;
  op.set_op_type("ScatterElements");
  e.add(op);
  return e.take();
}

/// RoiAlign version 10 (opsets 10..15) samples without the half-pixel shift that version 16's
/// default coordinate_transformation_mode 'half_pixel' applies: it is 'output_half_pixel'.
Expected<NodeList> upgradeRoiAlign(const onnx::NodeProto &n, int64_t, const UpgradeContext &ctx) {
  Emitter e(n, ctx);
  onnx::NodeProto op = n;
  setStringAttr(op, "coordinate_transformation_mode", "output_half_pixel");
  e.add(op);
  return e.take();
}

using Conversion = Expected<NodeList> (*)(const onnx::NodeProto &, int64_t, const UpgradeContext &);

struct Entry {
  const char *op;
  int64_t below; ///< versions older than this one need the conversion
  Conversion fn;
};

/// Op -> the version from which it needs no conversion, and the conversion of older versions.
const Entry kConversions[] = {
    {"Softmax", 13, upgradeSoftmax},
    {"LogSoftmax", 13, upgradeSoftmax},
    {"Hardmax", 13, upgradeSoftmax},
    {"Upsample", 10, upgradeUpsample},
    {"Resize", 11, upgradeUpsample},
    {"Slice", 10, upgradeSlice},
    {"Squeeze", 13, upgradeAxesToInput},
    {"Unsqueeze", 13, upgradeAxesToInput},
    {"ReduceSum", 13, upgradeAxesToInput},
    {"Split", 13, upgradeSplit},
    {"Pad", 11, upgradePad},
    {"Clip", 11, upgradeClip},
    {"TopK", 10, upgradeTopK},
    {"Dropout", 12, upgradeDropout},
    {"BatchNormalization", 14, upgradeBatchNorm},
    {"Scatter", 11, upgradeScatter},
    {"RoiAlign", 16, upgradeRoiAlign},
};

const Entry *findEntry(const std::string &op, int64_t since) {
  for (const Entry &e : kConversions)
    if (op == e.op && since < e.below) return &e;
  return nullptr;
}

} // namespace

bool needsUpgrade(const std::string &op, int64_t since) {
  return findEntry(op, since) != nullptr;
}

std::string upgradedOpType(const std::string &op, int64_t since) {
  if (op == "Upsample" && since < 10) return "Resize";
  if (op == "Scatter" && since < 11) return "ScatterElements";
  return op;
}

Expected<std::vector<onnx::NodeProto>> upgradeNode(const onnx::NodeProto &n, int64_t since,
                                                   const UpgradeContext &ctx) {
  const Entry *e = findEntry(n.op_type(), since);
  if (!e) return std::vector<onnx::NodeProto>{n};
  return e->fn(n, since, ctx);
}

} // namespace coil
