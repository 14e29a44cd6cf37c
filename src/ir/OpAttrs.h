/// \file Typed op attributes: the one place where the attributes of an op family are read,
/// given their ONNX defaults and validated, and where the rules that follow from them alone are
/// written (a sliding window's output size and padding, an einsum equation's labels, an RNN's
/// activation list).
///
/// Shape inference (ir/infer), the reference interpreter (interp/kernels), lowering (lower/ops)
/// and the importer's folding read these attributes only through the functions here, so they
/// cannot disagree. Every function returns a user error stating the rule broken (`strides must
/// be positive, got 0`); the caller adds the node's location (`node 'X' (Op): ...`). Inference
/// runs first on every node, so for a node in a verified graph the later layers see no error.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"
#include "support/SymInt.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coil {

// --- Sliding windows: Conv, ConvInteger, QLinearConv, ConvTranspose, MaxPool, AveragePool,
// LpPool, MaxUnpool

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

/// The window attributes of a node with `nd` spatial dims, defaults filled in.
struct WindowAttrs {
  size_t nd = 0;
  AutoPad autoPad = AutoPad::NotSet;
  std::optional<std::vector<int64_t>> kernelShape; ///< as given (pools require it)
  std::vector<int64_t> strides, dilations;         ///< nd values each, positive
  std::vector<int64_t> pads;                       ///< nd begins then nd ends, non-negative
  bool padsGiven = false;                          ///< whether `pads` was an attribute
  bool ceilMode = false;
  int64_t group = 1;                               ///< convolutions; positive
  std::vector<int64_t> outputPadding;              ///< ConvTranspose: at least nd values
  std::optional<std::vector<int64_t>> outputShape; ///< ConvTranspose: at least nd values
  bool countIncludePad = false;                    ///< AveragePool
  int64_t storageOrder = 0;                        ///< MaxPool: 0 or 1
  int64_t p = 2;                                   ///< LpPool

  bool same() const { return autoPad == AutoPad::SameUpper || autoPad == AutoPad::SameLower; }
};

/// The spatial dims of a windowed op's input [N, C, spatial...]: rank - 2; a user error below
/// rank 3.
Expected<size_t> spatialDims(int64_t rank);
/// A convolution's weights have the input's rank; a user error otherwise.
Status checkWeightRank(int64_t inputRank, int64_t weightRank);

/// Reads and validates the window attributes of `n` for `nd` spatial dims: auto_pad's value,
/// the lengths of kernel_shape (when given), strides, dilations and pads, positive strides and
/// dilations, non-negative pads, a positive group, ConvTranspose's output_padding and
/// output_shape lengths, MaxPool's storage_order.
Expected<WindowAttrs> decodeWindow(const Node &n, size_t nd);

/// decodeWindow for a pool (MaxPool, AveragePool, LpPool, MaxUnpool), which requires
/// kernel_shape.
Expected<WindowAttrs> decodePoolWindow(const Node &n, size_t nd);

/// One spatial dim of a sliding window: the output size and the padding applied before and
/// after the input (auto_pad SAME splits the padding that the output size needs).
struct WindowDim {
  SymInt out, padBegin, padEnd;
};

/// Dim `i` of the window of `w` over an input of size `in` with a kernel of size `k` (ceil_mode
/// honoured): out = floor((in + pads - span) / stride) + 1 with span = (k - 1) * dilation + 1.
/// A user error when `k` is not positive or when the output is known to be negative.
Expected<WindowDim> windowDim(const WindowAttrs &w, size_t i, const SymInt &in, const SymInt &k);

/// The padding that SAME auto_pad applies before dim `i` for an output of size `out`:
/// total = max(0, (out - 1) * stride + span - in), begin = total / 2 (SAME_UPPER) or
/// total - total / 2 (SAME_LOWER).
SymInt samePadBegin(const WindowAttrs &w, size_t i, const SymInt &in, const SymInt &k,
                    const SymInt &out);

/// ConvTranspose's output size along dim `i` and the padding removed before it: with SAME
/// auto_pad and no pads, out = output_shape or in * stride and the padding is split from
/// full - out (full = (in - 1) * stride + output_padding + span); otherwise out = output_shape
/// or full - pads. A user error when the output is known to be negative.
Expected<WindowDim> convTransposeDim(const WindowAttrs &w, size_t i, const SymInt &in,
                                     const SymInt &k);

/// MaxUnpool's default output size along dim `i` (the input size of the MaxPool it inverts):
/// (in - 1) * stride - pads + kernel.
SymInt unpoolDim(const WindowAttrs &w, size_t i, const SymInt &in);

// --- Einsum

/// An einsum equation: per operand its labels (the letter's code; -1 for the ellipsis), and the
/// output labels when the equation has an arrow.
struct EinsumEquation {
  std::vector<std::vector<int>> inputs;
  std::optional<std::vector<int>> output;
};

/// Parses Einsum's `equation` attribute: letters, ',' between operands, at most one "..." per
/// term, spaces ignored, one output term after "->"; as many terms as `numInputs`.
Expected<EinsumEquation> decodeEinsum(const Node &n, size_t numInputs);

/// The labels of an equation for operands of the given ranks: each operand's labels per dim
/// (the ellipsis dims become labels 1000 + j, right-aligned across the operands), the output's
/// (explicit, or the ellipsis then the letters that appear once, in code order) and the summed
/// ones (every other label, in code order). Checks the ranks against the equation and that the
/// output labels appear in an input, once.
struct EinsumLabels {
  std::vector<std::vector<int>> operands;
  std::vector<int> output, summed;
};
Expected<EinsumLabels> einsumLabels(const EinsumEquation &eq, const std::vector<size_t> &ranks);

/// The name of label `l` in messages ('i', or "..." for an ellipsis dim).
std::string einsumLabelName(int l);

// --- Recurrent cells: RNN, GRU, LSTM

enum class RnnCell { Rnn, Gru, Lstm };

struct RnnActivation {
  std::string name; ///< one of rnnActivationNames()
  double alpha = 0, beta = 0;
};

struct RnnAttrs {
  RnnCell cell = RnnCell::Rnn;
  std::string direction = "forward"; ///< forward, reverse or bidirectional
  int64_t dirs = 1;                  ///< 2 for bidirectional
  int64_t gates = 1;                 ///< 1 (RNN), 3 (GRU), 4 (LSTM)
  std::optional<int64_t> hiddenSize;
  int64_t layout = 0; ///< 1: batch first
  /// Per direction the cell's functions (RNN: f; GRU: f, g; LSTM: f, g, h), with their alpha
  /// and beta (ONNX's defaults per function where not given).
  std::vector<RnnActivation> activations;
  std::optional<double> clip;
  bool linearBeforeReset = false, inputForget = false;
};

/// Reads and validates the attributes of an RNN, GRU or LSTM node.
Expected<RnnAttrs> decodeRnn(const Node &n);

/// The activation functions coil implements, in the order of the extern's codes
/// (COIL_CPU_RNN_ACT_TANH = 0 ... COIL_CPU_RNN_ACT_SOFTPLUS = 10).
const std::vector<std::string> &rnnActivationNames();
/// The code of an activation name (its index in rnnActivationNames()).
int64_t rnnActivationCode(const std::string &name);

// --- Resize

struct ResizeAttrs {
  std::string mode = "nearest"; ///< nearest, linear or cubic
  std::string coordMode = "half_pixel";
  std::string nearestMode = "round_prefer_floor";
  double cubicA = -0.75, extrapolation = 0.0;
  bool excludeOutside = false;
  bool antialias = false;         ///< false for mode nearest, where it has no effect
  std::string policy = "stretch"; ///< keep_aspect_ratio_policy
  std::vector<int64_t> axes;      ///< normalized, distinct; every axis by default
};

/// Reads and validates Resize's attributes for an input of rank `rank`.
Expected<ResizeAttrs> decodeResize(const Node &n, int64_t rank);

// --- DepthToSpace, SpaceToDepth

/// The value of a Constant node: its `value` tensor (sharing its buffer), or the scalar or 1-D
/// tensor of value_float / value_int (f32 / i64) or value_floats / value_ints.
Expected<Tensor> decodeConstant(const Node &n);

struct BlockAttrs {
  int64_t blocksize = 0; ///< positive
  bool crd = false;      ///< DepthToSpace mode CRD (else DCR)
};
Expected<BlockAttrs> decodeBlock(const Node &n);

// --- GridSample, RoiAlign

struct GridSampleAttrs {
  std::string mode = "linear";   ///< linear, nearest or cubic (bilinear, bicubic: opset 16)
  std::string padding = "zeros"; ///< zeros, border or reflection
  bool alignCorners = false;
};
Expected<GridSampleAttrs> decodeGridSample(const Node &n);

struct RoiAlignAttrs {
  int64_t outHeight = 1, outWidth = 1; ///< positive
  int64_t samplingRatio = 0;           ///< 0: adaptive (from the roi size)
  double spatialScale = 1.0;
  bool max = false;      ///< mode max (else avg)
  bool halfPixel = true; ///< coordinate_transformation_mode half_pixel (else output_half_pixel)
};
Expected<RoiAlignAttrs> decodeRoiAlign(const Node &n);

// --- Pad, CenterCropPad

enum class PadMode { Constant, Reflect, Edge, Wrap };
/// Pad's `mode` (constant, reflect, edge or wrap; default constant).
Expected<PadMode> decodePadMode(const Node &n);
/// The attribute's spelling of a mode ("reflect").
const char *padModeName(PadMode m);

/// The axes a list names (Pad's `axes` input, CenterCropPad's `axes` attribute), each normalized
/// into [0, rank), in their order: a user error where one is outside [-rank, rank) or two name
/// the same dim.
Expected<std::vector<int64_t>> distinctAxes(const std::vector<int64_t> &axes, int64_t rank);

/// CenterCropPad's axes: the attribute (through distinctAxes), or every dim.
Expected<std::vector<int64_t>> decodeCenterCropAxes(const Node &n, int64_t rank);

/// Pad's `pads` (2 per padded axis: the begins, then the ends) over all `rank` dims: per dim the
/// padding before it and after it, 0 for a dim not padded. `axes` as distinctAxes gives them;
/// a user error where pads has not two values per axis. T: int64_t or SymInt.
template <class T> struct PadSpread { std::vector<T> begin, end; };
template <class T>
Expected<PadSpread<T>> spreadPads(const std::vector<T> &pads, const std::vector<int64_t> &axes,
                                  int64_t rank) {
  if (pads.size() != 2 * axes.size())
    return Error::user("pads must have " + std::to_string(2 * axes.size()) +
                       " elements (2 per padded axis), got " + std::to_string(pads.size()));
  PadSpread<T> s{std::vector<T>(size_t(rank), T(0)), std::vector<T>(size_t(rank), T(0))};
  for (size_t i = 0; i < axes.size(); ++i) {
    s.begin[size_t(axes[i])] = pads[i];
    s.end[size_t(axes[i])] = pads[i + axes.size()];
  }
  return s;
}

// --- Reductions: Reduce*, ArgMax, ArgMin

/// The Reduce* ops: one attribute set (ReduceAttrs), one inference, one reference kernel and one
/// lowering each, registered from this list.
inline constexpr OpKind kReduceOps[] = {
    OpKind::ReduceL1,  OpKind::ReduceL2,       OpKind::ReduceLogSum, OpKind::ReduceLogSumExp,
    OpKind::ReduceMax, OpKind::ReduceMean,     OpKind::ReduceMin,    OpKind::ReduceProd,
    OpKind::ReduceSum, OpKind::ReduceSumSquare};

// Ops that share one definition of their semantics (one inference, reference kernel and
// lowering each, registered from these lists); the op selects the variant.
inline constexpr OpKind kArgReduceOps[] = {OpKind::ArgMax, OpKind::ArgMin};
inline constexpr OpKind kSoftmaxOps[] = {OpKind::Softmax, OpKind::LogSoftmax, OpKind::Hardmax};
inline constexpr OpKind kCumulativeOps[] = {OpKind::CumSum, OpKind::CumProd};
/// LayerNormalization and RMSNormalization (the mean taken as 0).
inline constexpr OpKind kLayerNormOps[] = {OpKind::LayerNormalization, OpKind::RMSNormalization};
/// ScatterElements and its deprecated alias Scatter (opsets 9, 10).
inline constexpr OpKind kScatterElementsOps[] = {OpKind::ScatterElements, OpKind::Scatter};

struct ReduceAttrs {
  bool keepdims = true;
  bool noopWithEmptyAxes = false;
  std::optional<std::vector<int64_t>> axes; ///< the attribute (opset < 18 form), as given
};

Expected<ReduceAttrs> decodeReduce(const Node &n);

} // namespace coil
