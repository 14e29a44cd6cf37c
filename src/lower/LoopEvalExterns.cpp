// Evaluator adapters of the CPU kernels (kernels/cpu): for every extern function name, a
// function that checks the arguments of the ExternNode against the kernel's C signature and
// the sizes of the evaluator's tensors (a mismatch is a lowering bug: an internal error, never
// an out-of-bounds access), then calls the kernel. Allocating kernels get an allocator whose
// blocks become the output tensors.
#include "kernels/Externs.h"
#include "kernels/cpu/CpuKernels.h"
#include "lower/LoopEval.h"

#include <cstring>
#include <memory>

namespace coil::loop {
namespace {

using Args = std::vector<EvalExternArg>;
using K = ExternArg::Kind;

/// Checks the argument kinds against `sig` (N node, O output, I int, F float, S out-symbol).
Status checkSignature(const ExternNode &en, const Args &a, const char *sig) {
  size_t n = std::strlen(sig);
  bool ok = a.size() == n;
  for (size_t i = 0; ok && i < n; ++i) {
    K want = sig[i] == 'N'   ? K::Node
             : sig[i] == 'O' ? K::Output
             : sig[i] == 'I' ? K::Int
             : sig[i] == 'F' ? K::Float
                             : K::OutSymbol;
    ok = a[i].kind == want && (want != K::Node || a[i].tensor) &&
         (want != K::Output || a[i].output) && (want != K::OutSymbol || a[i].outSymbol);
  }
  if (!ok)
    return Error::internal("extern '" + en.function + "' called with arguments that do not fit " +
                           "its signature " + sig);
  return okStatus();
}

Status checkNumel(const ExternNode &en, const Tensor &t, int64_t want, const char *what) {
  if (t.numel() != want)
    return Error::internal("extern '" + en.function + "': " + what + " has " +
                           std::to_string(t.numel()) + " elements, the sizes say " +
                           std::to_string(want));
  return okStatus();
}

/// The status of a kernel call: on failure, the kernel's message (the run-time values broke the
/// op's rule, as in the compiled program, where the wrapper reports the same message).
Status kernelStatus(int32_t rc) {
  if (rc == 0) return okStatus();
  return Error::user(coil_cpu_last_error());
}

/// Product of sizes, or -1 when negative or overflowing (never matches a tensor's numel).
int64_t prod(std::initializer_list<int64_t> v) {
  int64_t p = 1;
  for (int64_t x : v)
    if (x < 0 || __builtin_mul_overflow(p, x, &p)) return -1;
  return p;
}

const void *in(const Args &a, size_t i) {
  return a[i].tensor->data();
}
void *out(const Args &a, size_t i) {
  return a[i].output->data();
}

// --- GEMM: a, b, y, batch, m, n, k, transA, transB, strideA, strideB, alpha

using GemmFn = int32_t (*)(const void *, const void *, void *, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, double);

EvalExternFn gemmAdapter(GemmFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNOIIIIIIIIF"));
    int64_t batch = a[3].i, m = a[4].i, n = a[5].i, k = a[6].i, sa = a[9].i, sb = a[10].i;
    // Every matrix read must lie inside its tensor.
    auto fits = [&](const Tensor &t, int64_t stride, int64_t size) {
      if (batch == 0 || size == 0) return true;
      int64_t last = prod({batch - 1, stride});
      return last >= 0 && size >= 0 && last + size <= t.numel();
    };
    if (batch < 0 || !fits(*a[0].tensor, sa, prod({m, k})) || !fits(*a[1].tensor, sb, prod({k, n})))
      return Error::internal("extern '" + en.function + "': operands smaller than their sizes");
    COIL_TRY_STATUS(checkNumel(en, *a[2].output, prod({batch, m, n}), "the output"));
    return kernelStatus(
        fn(in(a, 0), in(a, 1), out(a, 2), batch, m, n, k, a[7].i, a[8].i, sa, sb, a[11].number));
  };
}

// --- convolutions: x, w, y, n, c, m, group, nd, in[3], k[3], out[3], s[3], d[3], p[3]

using ConvFn = int32_t (*)(const void *, const void *, void *, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t);

EvalExternFn convAdapter(ConvFn fn, bool transpose) {
  return [fn, transpose](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNOIIIIIIIIIIIIIIIIIIIIIII"));
    auto v = [&](size_t i) { return a[i].i; };
    int64_t n = v(3), c = v(4), m = v(5), group = v(6);
    int64_t inS = prod({v(8), v(9), v(10)}), kS = prod({v(11), v(12), v(13)}),
            outS = prod({v(14), v(15), v(16)});
    if (group < 1 || c % group || m % group)
      return Error::internal("extern '" + en.function + "': group does not divide the channels");
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({n, c, inS}), "the input"));
    int64_t wSize = transpose ? prod({c, m / group, kS}) : prod({m, c / group, kS});
    COIL_TRY_STATUS(checkNumel(en, *a[1].tensor, wSize, "the weights"));
    COIL_TRY_STATUS(checkNumel(en, *a[2].output, prod({n, m, outS}), "the output"));
    return kernelStatus(fn(in(a, 0), in(a, 1), out(a, 2), n, c, m, group, v(7), v(8), v(9), v(10),
                           v(11), v(12), v(13), v(14), v(15), v(16), v(17), v(18), v(19), v(20),
                           v(21), v(22), v(23), v(24), v(25)));
  };
}

// --- convolutions (channels-first or -last) with a fused bias and clamp: x, w, bias, y, the
// conv's sizes, clamp, lo, hi

using ConvBiasFn = int32_t (*)(const void *, const void *, const void *, void *, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, double, double);
EvalExternFn convBiasAdapter(ConvBiasFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNOIIIIIIIIIIIIIIIIIIIIIIIIFF"));
    auto v = [&](size_t i) { return a[i].i; };
    int64_t n = v(4), c = v(5), m = v(6), group = v(7);
    int64_t inS = prod({v(9), v(10), v(11)}), kS = prod({v(12), v(13), v(14)}),
            outS = prod({v(15), v(16), v(17)});
    if (group < 1 || c % group || m % group)
      return Error::internal("extern '" + en.function + "': group does not divide the channels");
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({n, c, inS}), "the input"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].tensor, prod({m, c / group, kS}), "the weights"));
    COIL_TRY_STATUS(checkNumel(en, *a[2].tensor, m, "the bias"));
    COIL_TRY_STATUS(checkNumel(en, *a[3].output, prod({n, m, outS}), "the output"));
    return kernelStatus(fn(in(a, 0), in(a, 1), in(a, 2), out(a, 3), n, c, m, group, v(8), v(9),
                           v(10), v(11), v(12), v(13), v(14), v(15), v(16), v(17), v(18), v(19),
                           v(20), v(21), v(22), v(23), v(24), v(25), v(26), v(27), a[28].number,
                           a[29].number));
  };
}

// --- Det: x, y, batch, n

using DetFn = int32_t (*)(const void *, void *, int64_t, int64_t);
EvalExternFn detAdapter(DetFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOII"));
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({a[2].i, a[3].i, a[3].i}), "the input"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].output, a[2].i, "the output"));
    return kernelStatus(fn(in(a, 0), out(a, 1), a[2].i, a[3].i));
  };
}

// --- recurrent ops: xw, r, b, lens, h0, c0, p, acts, y, yh, yc, cell, seq, batch, hidden, dirs,
//     reverse, linear_before_reset, input_forget, has_clip, clip

using RecurrentFn = int32_t (*)(const void *, const void *, const void *, const void *,
                                const void *, const void *, const void *, const void *, void *,
                                void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, double);
EvalExternFn recurrentAdapter(RecurrentFn fn, DType t) {
  return [fn, t](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNNNNNNOOOIIIIIIIIIF"));
    int64_t cell = a[11].i, seq = a[12].i, batch = a[13].i, hid = a[14].i, dirs = a[15].i;
    int64_t gates = cell == 0 ? 1 : cell == 1 ? 3 : 4;
    bool lstm = cell == 2;
    // Buffers the kernel does not read (initial_c and P of RNN and GRU) are not checked.
    struct Want {
      size_t arg;
      int64_t numel;
      DType dtype;
      const char *what;
    } wants[] = {{0, prod({dirs, seq, batch, gates, hid}), t, "xw"},
                 {1, prod({dirs, gates, hid, hid}), t, "R"},
                 {2, prod({dirs, 2, gates, hid}), t, "B"},
                 {3, batch, DType::I64, "sequence_lens"},
                 {4, prod({dirs, batch, hid}), t, "initial_h"},
                 {5, lstm ? prod({dirs, batch, hid}) : -2, t, "initial_c"},
                 {6, lstm ? prod({dirs, 3, hid}) : -2, t, "P"},
                 {7, prod({dirs, 3, 3}), DType::F64, "the activations"},
                 {8, prod({seq, dirs, batch, hid}), t, "Y"},
                 {9, prod({dirs, batch, hid}), t, "Y_h"},
                 {10, prod({dirs, batch, hid}), t, "Y_c"}};
    for (const Want &w : wants) {
      if (w.numel == -2) continue;
      const Tensor &x = w.arg < 8 ? *a[w.arg].tensor : *a[w.arg].output;
      COIL_TRY_STATUS(checkNumel(en, x, w.numel, w.what));
      if (x.dtype() != w.dtype)
        return Error::internal("extern '" + en.function + "': " + w.what + " has dtype " +
                               std::string(dtypeName(x.dtype())));
    }
    return kernelStatus(fn(in(a, 0), in(a, 1), in(a, 2), in(a, 3), in(a, 4), in(a, 5), in(a, 6),
                           in(a, 7), out(a, 8), out(a, 9), out(a, 10), cell, seq, batch, hid, dirs,
                           a[16].i, a[17].i, a[18].i, a[19].i, a[20].number));
  };
}

// --- scans: x, y, outer, len, inner, exclusive, reverse

using ScanFn = int32_t (*)(const void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t);
EvalExternFn scanAdapter(ScanFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOIIIII"));
    int64_t all = prod({a[2].i, a[3].i, a[4].i});
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, all, "the input"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].output, all, "the output"));
    return kernelStatus(fn(in(a, 0), out(a, 1), a[2].i, a[3].i, a[4].i, a[5].i, a[6].i));
  };
}

// --- TopK: x, values, indices, outer, len, inner, k, largest

using TopKFn = int32_t (*)(const void *, void *, void *, int64_t, int64_t, int64_t, int64_t,
                           int64_t);
EvalExternFn topkAdapter(TopKFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOOIIIII"));
    int64_t outer = a[3].i, len = a[4].i, inner = a[5].i, k = a[6].i;
    // A K out of range fails in the kernel before it touches a buffer: its message.
    if (k < 0 || k > len)
      return kernelStatus(fn(nullptr, nullptr, nullptr, outer, len, inner, k, a[7].i));
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({outer, len, inner}), "the input"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].output, prod({outer, k, inner}), "the values"));
    COIL_TRY_STATUS(checkNumel(en, *a[2].output, prod({outer, k, inner}), "the indices"));
    return kernelStatus(fn(in(a, 0), out(a, 1), out(a, 2), outer, len, inner, k, a[7].i));
  };
}

// --- scans with a run-time axis: x, axis, shape, y, rank, axisIsI32, exclusive, reverse

using ScanDynFn = int32_t (*)(const void *, const void *, const void *, void *, int64_t, int64_t,
                              int64_t, int64_t);
EvalExternFn scanDynAdapter(ScanDynFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNOIIII"));
    const Tensor &x = *a[0].tensor, &axis = *a[1].tensor, &shape = *a[2].tensor;
    int64_t rank = a[4].i;
    if (shape.dtype() != DType::I64 || shape.numel() != rank || rank != x.rank() ||
        axis.numel() != 1 || axis.dtype() != (a[5].i ? DType::I32 : DType::I64))
      return Error::internal("extern '" + en.function + "': shape or axis buffers do not fit");
    for (int64_t d = 0; d < rank; ++d)
      if (shape.getInt(d) != x.dim(d))
        return Error::internal("extern '" + en.function + "': the shape buffer is not x's");
    COIL_TRY_STATUS(checkNumel(en, *a[3].output, x.numel(), "the output"));
    // The kernel checks the axis.
    return kernelStatus(
        fn(x.data(), axis.data(), shape.data(), out(a, 3), rank, a[5].i, a[6].i, a[7].i));
  };
}

// --- allocating calls

/// Blocks handed out by the allocator of one call.
struct Blocks {
  std::vector<std::unique_ptr<std::vector<uint8_t>>> list;
  static void *alloc(void *ctx, size_t bytes) {
    auto *b = static_cast<Blocks *>(ctx);
    b->list.push_back(std::make_unique<std::vector<uint8_t>>(bytes ? bytes : 1));
    return b->list.back()->data();
  }
};

/// A tensor of `dtype` and `shape` copied from `p` (nullptr only when empty).
Status adopt(const ExternNode &en, Tensor *dst, DType dtype, Shape shape, const void *p) {
  Tensor t(dtype, std::move(shape));
  if (t.nbytes() > 0 && !p)
    return Error::internal("extern '" + en.function + "' did not allocate an output");
  if (t.nbytes() > 0) std::memcpy(t.data(), p, t.nbytes());
  *dst = std::move(t);
  return okStatus();
}

// NonZero: x, indices, count, numel
using NonZeroFn = int32_t (*)(coil_alloc_fn, void *, const void *, void **, int64_t *, int64_t);
EvalExternFn nonzeroAdapter(NonZeroFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOSI"));
    if (a[3].i < 0 || a[3].i > a[0].tensor->numel())
      return Error::internal("extern '" + en.function + "': numel beyond the input");
    Blocks blocks;
    void *p = nullptr;
    COIL_TRY_STATUS(
        kernelStatus(fn(&Blocks::alloc, &blocks, in(a, 0), &p, a[2].outSymbol, a[3].i)));
    return adopt(en, a[1].output, DType::I64, {*a[2].outSymbol}, p);
  };
}

// Unique: x, y, indices, inverse, counts, count, outer, len, inner, sorted
using UniqueFn = int32_t (*)(coil_alloc_fn, void *, const void *, void **, void **, void **,
                             void **, int64_t *, int64_t, int64_t, int64_t, int64_t);
EvalExternFn uniqueAdapter(UniqueFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOOOOSIIII"));
    const Tensor &x = *a[0].tensor;
    int64_t outer = a[6].i, len = a[7].i, inner = a[8].i;
    COIL_TRY_STATUS(checkNumel(en, x, prod({outer, len, inner}), "the input"));
    // The axis is the dim of y whose size is the data-dependent symbol.
    const auto &yShape = en.outputs.at(0).shape;
    size_t axis = yShape.size();
    for (size_t d = 0; d < yShape.size(); ++d)
      if (yShape[d].isSymbol() && yShape[d].symbolName() == en.args[5].symbol) axis = d;
    if (axis == yShape.size() || int64_t(yShape.size()) != x.rank())
      return Error::internal("extern '" + en.function + "': no dim of y is the unique count");
    Blocks blocks;
    void *p[4] = {nullptr, nullptr, nullptr, nullptr};
    COIL_TRY_STATUS(kernelStatus(fn(&Blocks::alloc, &blocks, x.data(), &p[0], &p[1], &p[2], &p[3],
                                    a[5].outSymbol, outer, len, inner, a[9].i)));
    int64_t u = *a[5].outSymbol;
    Shape ys = x.shape();
    ys[axis] = u;
    COIL_TRY_STATUS(adopt(en, a[1].output, x.dtype(), ys, p[0]));
    COIL_TRY_STATUS(adopt(en, a[2].output, DType::I64, {u}, p[1]));
    COIL_TRY_STATUS(adopt(en, a[3].output, DType::I64, {len}, p[2]));
    return adopt(en, a[4].output, DType::I64, {u}, p[3]);
  };
}

// NonMaxSuppression: boxes, scores, maxOut, iou, scoreThreshold, selected, count, batches,
// classes, nboxes, maxCount, iouCount, scoreCount, centerPointBox
EvalExternFn nmsAdapter() {
  return [](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNNNOSIIIIIII"));
    int64_t nb = a[7].i, nc = a[8].i, n = a[9].i;
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({nb, n, 4}), "boxes"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].tensor, prod({nb, nc, n}), "scores"));
    const DType want[3] = {DType::I64, DType::F32, DType::F32};
    for (size_t i = 0; i < 3; ++i) {
      int64_t count = a[10 + i].i;
      const Tensor &t = *a[2 + i].tensor;
      if (count > 0 && (t.numel() != count || t.dtype() != want[i]))
        return Error::internal("extern '" + en.function + "': scalar input " +
                               std::to_string(2 + i) + " does not fit its count");
    }
    Blocks blocks;
    void *p = nullptr;
    COIL_TRY_STATUS(kernelStatus(coil_cpu_nms_dyn_f32(
        &Blocks::alloc, &blocks, in(a, 0), in(a, 1), in(a, 2), in(a, 3), in(a, 4), &p,
        a[6].outSymbol, nb, nc, n, a[10].i, a[11].i, a[12].i, a[13].i)));
    return adopt(en, a[5].output, DType::I64, {*a[6].outSymbol, 3}, p);
  };
}

// TopK with a run-time K: x, k, values, indices, count, outer, len, inner, largest
using TopKDynFn = int32_t (*)(coil_alloc_fn, void *, const void *, const void *, void **, void **,
                              int64_t *, int64_t, int64_t, int64_t, int64_t);
EvalExternFn topkDynAdapter(TopKDynFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNOOSIIII"));
    const Tensor &x = *a[0].tensor, &kt = *a[1].tensor;
    int64_t outer = a[5].i, len = a[6].i, inner = a[7].i;
    COIL_TRY_STATUS(checkNumel(en, x, prod({outer, len, inner}), "the input"));
    if (kt.numel() != 1 || kt.dtype() != DType::I64)
      return Error::internal("extern '" + en.function + "': K must be one i64");
    // The kernel checks K.
    const auto &vShape = en.outputs.at(0).shape;
    size_t axis = vShape.size();
    for (size_t d = 0; d < vShape.size(); ++d)
      if (vShape[d].isSymbol() && vShape[d].symbolName() == en.args[4].symbol) axis = d;
    if (axis == vShape.size() || int64_t(vShape.size()) != x.rank())
      return Error::internal("extern '" + en.function + "': no dim of the values is K");
    Blocks blocks;
    void *pv = nullptr, *pi = nullptr;
    COIL_TRY_STATUS(kernelStatus(fn(&Blocks::alloc, &blocks, x.data(), kt.data(), &pv, &pi,
                                    a[4].outSymbol, outer, len, inner, a[8].i)));
    Shape s = x.shape();
    s[axis] = *a[4].outSymbol;
    COIL_TRY_STATUS(adopt(en, a[2].output, x.dtype(), s, pv));
    return adopt(en, a[3].output, DType::I64, s, pi);
  };
}

// --- Reduce* with run-time axes: x, axes, y, y0..y7 (out-symbols), rank, d0..d7, naxes, kind,
//     keepdims, noopWithEmptyAxes

using ReduceDynFn = int32_t (*)(coil_alloc_fn, void *, const void *, const void *, void **,
                                int64_t *, int64_t *, int64_t *, int64_t *, int64_t *, int64_t *,
                                int64_t *, int64_t *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t);
EvalExternFn reduceDynAdapter(ReduceDynFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNOSSSSSSSSIIIIIIIIIIIII"));
    const Tensor &x = *a[0].tensor, &axes = *a[1].tensor;
    int64_t rank = a[11].i, naxes = a[20].i, kind = a[21].i;
    bool keepdims = a[22].i != 0, noop = a[23].i != 0;
    if (rank != x.rank() || rank > 8 || kind < 0 || kind > 9)
      return Error::internal("extern '" + en.function + "': rank or kind do not fit");
    for (int64_t d = 0; d < rank; ++d)
      if (a[12 + size_t(d)].i != x.dim(d))
        return Error::internal("extern '" + en.function + "': the dims are not x's");
    if (axes.dtype() != DType::I64 || axes.numel() != naxes)
      return Error::internal("extern '" + en.function + "': axes do not fit their count");
    // The kernel checks the axes (the rules of the interpreter's planReduce).
    Blocks blocks;
    void *p = nullptr;
    COIL_TRY_STATUS(kernelStatus(fn(&Blocks::alloc, &blocks, x.data(), axes.data(), &p,
                                    a[3].outSymbol, a[4].outSymbol, a[5].outSymbol, a[6].outSymbol,
                                    a[7].outSymbol, a[8].outSymbol, a[9].outSymbol, a[10].outSymbol,
                                    rank, a[12].i, a[13].i, a[14].i, a[15].i, a[16].i, a[17].i,
                                    a[18].i, a[19].i, naxes, kind, a[22].i, a[23].i)));
    int64_t outRank = rank;
    if (!keepdims && !(naxes == 0 && noop)) outRank = naxes == 0 ? 0 : rank - naxes;
    const auto &yShape = en.outputs.at(0).shape;
    if (int64_t(yShape.size()) != outRank)
      return Error::user("the result has rank " + std::to_string(outRank) +
                         ", the compiled program expects rank " + std::to_string(yShape.size()));
    Shape s;
    for (int64_t d = 0; d < outRank; ++d) s.push_back(*a[3 + size_t(d)].outSymbol);
    return adopt(en, a[2].output, x.dtype(), s, p);
  };
}

} // namespace

void registerCpuShapeEvalExterns();
void registerCpuGemmBiasEvalExterns();
void registerCpuAttentionEvalExterns();
void registerCpuResizeEvalExterns();

void registerCpuKernelEvalExterns() {
  registerCpuShapeEvalExterns();
  registerCpuGemmBiasEvalExterns();
  registerCpuAttentionEvalExterns();
  registerCpuResizeEvalExterns();
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Gemm, DType::F32),
                     gemmAdapter(coil_cpu_gemm_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Gemm, DType::F64),
                     gemmAdapter(coil_cpu_gemm_f64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Conv, DType::F32),
                     convAdapter(coil_cpu_conv_f32, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Conv, DType::F64),
                     convAdapter(coil_cpu_conv_f64, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvBias, DType::F32),
                     convBiasAdapter(coil_cpu_conv_bias_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvBias, DType::F64),
                     convBiasAdapter(coil_cpu_conv_bias_f64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvTranspose, DType::F32),
                     convAdapter(coil_cpu_conv_transpose_f32, true));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvTranspose, DType::F64),
                     convAdapter(coil_cpu_conv_transpose_f64, true));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Gemm, DType::F16),
                     gemmAdapter(coil_cpu_gemm_f16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Gemm, DType::BF16),
                     gemmAdapter(coil_cpu_gemm_bf16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Conv, DType::F16),
                     convAdapter(coil_cpu_conv_f16, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Conv, DType::BF16),
                     convAdapter(coil_cpu_conv_bf16, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvBias, DType::F16),
                     convBiasAdapter(coil_cpu_conv_bias_f16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvBias, DType::BF16),
                     convBiasAdapter(coil_cpu_conv_bias_bf16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvTranspose, DType::F16),
                     convAdapter(coil_cpu_conv_transpose_f16, true));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvTranspose, DType::BF16),
                     convAdapter(coil_cpu_conv_transpose_bf16, true));
  // Channels-last convolutions: the same geometry and element counts as the NCHW ones.
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwc, DType::F32),
                     convAdapter(coil_cpu_conv_nhwc_f32, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwc, DType::F64),
                     convAdapter(coil_cpu_conv_nhwc_f64, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwc, DType::F16),
                     convAdapter(coil_cpu_conv_nhwc_f16, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwc, DType::BF16),
                     convAdapter(coil_cpu_conv_nhwc_bf16, false));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwcBias, DType::F32),
                     convBiasAdapter(coil_cpu_conv_nhwc_bias_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwcBias, DType::F64),
                     convBiasAdapter(coil_cpu_conv_nhwc_bias_f64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwcBias, DType::F16),
                     convBiasAdapter(coil_cpu_conv_nhwc_bias_f16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ConvNhwcBias, DType::BF16),
                     convBiasAdapter(coil_cpu_conv_nhwc_bias_bf16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Recurrent, DType::F32),
                     recurrentAdapter(coil_cpu_recurrent_f32, DType::F32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Recurrent, DType::F64),
                     recurrentAdapter(coil_cpu_recurrent_f64, DType::F64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Det, DType::F32),
                     detAdapter(coil_cpu_det_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Det, DType::F64),
                     detAdapter(coil_cpu_det_f64));
#define COIL_REGISTER_NUMERIC(S, E)                                                                \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::CumSum, DType::E),                      \
                     scanAdapter(coil_cpu_cumsum_##S));                                            \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::CumProd, DType::E),                     \
                     scanAdapter(coil_cpu_cumprod_##S));                                           \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::TopK, DType::E),                        \
                     topkAdapter(coil_cpu_topk_##S));                                              \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::CumSumDyn, DType::E),                   \
                     scanDynAdapter(coil_cpu_cumsum_dyn_##S));                                     \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::CumProdDyn, DType::E),                  \
                     scanDynAdapter(coil_cpu_cumprod_dyn_##S));                                    \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::TopKDyn, DType::E),                     \
                     topkDynAdapter(coil_cpu_topk_dyn_##S));
#define COIL_REGISTER_DYNAMIC(S, E)                                                                \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::NonZero, DType::E),                     \
                     nonzeroAdapter(coil_cpu_nonzero_##S));                                        \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Unique, DType::E),                      \
                     uniqueAdapter(coil_cpu_unique_##S));
#define COIL_REGISTER_ALL(S, E) COIL_REGISTER_NUMERIC(S, E) COIL_REGISTER_DYNAMIC(S, E)
  COIL_REGISTER_ALL(f64, F64)
  COIL_REGISTER_ALL(f32, F32)
  COIL_REGISTER_ALL(f16, F16)
  COIL_REGISTER_ALL(bf16, BF16)
  COIL_REGISTER_ALL(i64, I64)
  COIL_REGISTER_ALL(i32, I32)
  COIL_REGISTER_ALL(i16, I16)
  COIL_REGISTER_ALL(i8, I8)
  COIL_REGISTER_ALL(u64, U64)
  COIL_REGISTER_ALL(u32, U32)
  COIL_REGISTER_ALL(u16, U16)
  COIL_REGISTER_ALL(u8, U8)
  COIL_REGISTER_DYNAMIC(bool, Bool)
#undef COIL_REGISTER_ALL
#undef COIL_REGISTER_DYNAMIC
#undef COIL_REGISTER_NUMERIC
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::NmsDyn, DType::F32), nmsAdapter());
#define COIL_REGISTER_REDUCE_DYN(S, E)                                                             \
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ReduceDyn, DType::E),                   \
                     reduceDynAdapter(coil_cpu_reduce_dyn_##S));
  COIL_REGISTER_REDUCE_DYN(f64, F64)
  COIL_REGISTER_REDUCE_DYN(f32, F32)
  COIL_REGISTER_REDUCE_DYN(f16, F16)
  COIL_REGISTER_REDUCE_DYN(bf16, BF16)
  COIL_REGISTER_REDUCE_DYN(i64, I64)
  COIL_REGISTER_REDUCE_DYN(i32, I32)
  COIL_REGISTER_REDUCE_DYN(i16, I16)
  COIL_REGISTER_REDUCE_DYN(i8, I8)
  COIL_REGISTER_REDUCE_DYN(u64, U64)
  COIL_REGISTER_REDUCE_DYN(u32, U32)
  COIL_REGISTER_REDUCE_DYN(u16, U16)
  COIL_REGISTER_REDUCE_DYN(u8, U8)
  COIL_REGISTER_REDUCE_DYN(bool, Bool)
#undef COIL_REGISTER_REDUCE_DYN
}

// --- Output shapes from run-time tensors (kernels/cpu/CpuShape.cpp)

namespace {
// Shape dims: values, inDims, status, s0..s15, op, nValues, inRank, outRank, attr
EvalExternFn shapeDimsAdapter() {
  return [](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNOSSSSSSSSSSSSSSSSIIIII"));
    const Tensor &v = *a[0].tensor, &dims = *a[1].tensor;
    int64_t nValues = a[20].i, inRank = a[21].i;
    if (v.dtype() != DType::I64 || dims.dtype() != DType::I64)
      return Error::internal("extern '" + en.function + "': values and dims must be i64");
    COIL_TRY_STATUS(checkNumel(en, v, nValues, "the values"));
    COIL_TRY_STATUS(checkNumel(en, dims, inRank, "the input dims"));
    int64_t *s[16];
    for (size_t i = 0; i < 16; ++i) s[i] = a[3 + i].outSymbol;
    Blocks blocks;
    void *p = nullptr;
    COIL_TRY_STATUS(kernelStatus(
        coil_cpu_shape_dims(&Blocks::alloc, &blocks, v.data(), dims.data(), &p, s[0], s[1], s[2],
                            s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13],
                            s[14], s[15], a[19].i, nValues, inRank, a[22].i, a[23].i)));
    return adopt(en, a[2].output, DType::I64, {1}, p);
  };
}
} // namespace

void registerCpuShapeEvalExterns() {
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::ShapeDims), shapeDimsAdapter());
}

// --- GEMM with a bias epilogue (kernels/cpu/CpuGemm.cpp): a, b, bias, y, batch, m, n, k,
// transA, transB, strideA, strideB, alpha, relu

namespace {
using GemmBiasFn = int32_t (*)(const void *, const void *, const void *, void *, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double,
                               int64_t);

EvalExternFn gemmBiasAdapter(GemmBiasFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNOIIIIIIIIFI"));
    int64_t batch = a[4].i, m = a[5].i, n = a[6].i, k = a[7].i, sa = a[10].i, sb = a[11].i;
    auto fits = [&](const Tensor &t, int64_t stride, int64_t size) {
      if (batch == 0 || size == 0) return true;
      int64_t last = prod({batch - 1, stride});
      return last >= 0 && size >= 0 && last + size <= t.numel();
    };
    if (batch < 0 || !fits(*a[0].tensor, sa, prod({m, k})) || !fits(*a[1].tensor, sb, prod({k, n})))
      return Error::internal("extern '" + en.function + "': operands smaller than their sizes");
    if (a[2].tensor->dtype() != a[3].output->dtype())
      return Error::internal("extern '" + en.function +
                             "': the bias dtype differs from the output");
    COIL_TRY_STATUS(checkNumel(en, *a[2].tensor, n, "the bias"));
    COIL_TRY_STATUS(checkNumel(en, *a[3].output, prod({batch, m, n}), "the output"));
    return kernelStatus(fn(in(a, 0), in(a, 1), in(a, 2), out(a, 3), batch, m, n, k, a[8].i, a[9].i,
                           sa, sb, a[12].number, a[13].i));
  };
}
} // namespace

void registerCpuGemmBiasEvalExterns() {
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::GemmBias, DType::F32),
                     gemmBiasAdapter(coil_cpu_gemm_bias_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::GemmBias, DType::F64),
                     gemmBiasAdapter(coil_cpu_gemm_bias_f64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::GemmBias, DType::F16),
                     gemmBiasAdapter(coil_cpu_gemm_bias_f16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::GemmBias, DType::BF16),
                     gemmBiasAdapter(coil_cpu_gemm_bias_bf16));
}

// --- Fused attention (kernels/cpu/CpuAttention.cpp): q, k, v, mask, y, batch, heads, kvHeads,
// seqQ, seqK, headDim, headDimV, (offset, strideB, strideH, strideS) of q, k and v, y's three
// strides, maskKind, mask offset and four strides, causal, causalOffset, scale, softcap

namespace {
using AttentionFn = int32_t (*)(const void *, const void *, const void *, const void *, void *,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, double, double);

EvalExternFn attentionAdapter(AttentionFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NNNNOIIIIIIIIIIIIIIIIIIIIIIIIIIIIIIFF"));
    auto v = [&](size_t i) { return a[i].i; };
    int64_t B = v(5), H = v(6), HK = v(7), S = v(8), T = v(9), D = v(10), DV = v(11);
    // Every element read or written must lie inside its tensor (the kernel checks the rest).
    auto inside = [&](const Tensor &t, int64_t off,
                      std::initializer_list<std::pair<int64_t, int64_t>> dims, int64_t last) {
      int64_t hi = off;
      for (auto [extent, stride] : dims) {
        if (extent == 0) return true;
        int64_t p = prod({extent - 1, stride});
        if (p < 0 || __builtin_add_overflow(hi, p, &hi)) return false;
      }
      if (last == 0) return true;
      return off >= 0 && hi + last <= t.numel();
    };
    DType dt = a[4].output->dtype();
    for (size_t i = 0; i < 3; ++i)
      if (a[i].tensor->dtype() != dt)
        return Error::internal("extern '" + en.function + "': Q, K, V and Y differ in dtype");
    int64_t kind = v(27);
    if (kind == 1 && a[3].tensor->dtype() != DType::Bool)
      return Error::internal("extern '" + en.function + "': a bool mask must be bool");
    if (kind == 2 && a[3].tensor->dtype() != dt)
      return Error::internal("extern '" + en.function + "': an additive mask has Y's dtype");
    bool ok = B >= 0 && H >= 0 && HK >= 0 && S >= 0 && T >= 0 && D >= 0 && DV >= 0 &&
              inside(*a[0].tensor, v(12), {{B, v(13)}, {H, v(14)}, {S, v(15)}}, D) &&
              inside(*a[1].tensor, v(16), {{B, v(17)}, {HK, v(18)}, {T, v(19)}}, D) &&
              inside(*a[2].tensor, v(20), {{B, v(21)}, {HK, v(22)}, {T, v(23)}}, DV) &&
              inside(*a[4].output, 0, {{B, v(24)}, {H, v(25)}, {S, v(26)}}, DV) &&
              (kind == 0 ||
               inside(*a[3].tensor, v(28), {{B, v(29)}, {H, v(30)}, {S, v(31)}, {T, v(32)}}, 1));
    if (!ok)
      return Error::internal("extern '" + en.function + "': operands smaller than their sizes");
    return kernelStatus(fn(in(a, 0), in(a, 1), in(a, 2), in(a, 3), out(a, 4), B, H, HK, S, T, D, DV,
                           v(12), v(13), v(14), v(15), v(16), v(17), v(18), v(19), v(20), v(21),
                           v(22), v(23), v(24), v(25), v(26), kind, v(28), v(29), v(30), v(31),
                           v(32), v(33), v(34), a[35].number, a[36].number));
  };
}
} // namespace

void registerCpuAttentionEvalExterns() {
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Attention, DType::F64),
                     attentionAdapter(coil_cpu_attention_f64));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Attention, DType::F32),
                     attentionAdapter(coil_cpu_attention_f32));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Attention, DType::F16),
                     attentionAdapter(coil_cpu_attention_f16));
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Attention, DType::BF16),
                     attentionAdapter(coil_cpu_attention_bf16));
}

// --- Resize of the two innermost axes (kernels/cpu/CpuResize.cpp): x, y, planes, inH, inW,
// outH, outW, scaleH, numH, denH, scaleW, numW, denW, mode, coord, nearestMode

namespace {
using Resize2dFn = int32_t (*)(const void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                               double, int64_t, int64_t, double, int64_t, int64_t, int64_t, int64_t,
                               int64_t);

EvalExternFn resize2dAdapter(Resize2dFn fn) {
  return [fn](const ExternNode &en, Args &a) -> Status {
    COIL_TRY_STATUS(checkSignature(en, a, "NOIIIIIFIIFIIIII"));
    int64_t planes = a[2].i, inH = a[3].i, inW = a[4].i, outH = a[5].i, outW = a[6].i;
    if (planes < 0 || inH < 0 || inW < 0 || outH < 0 || outW < 0)
      return kernelStatus(fn(nullptr, nullptr, planes, inH, inW, outH, outW, 1, 0, 0, 1, 0, 0,
                             a[13].i, a[14].i, a[15].i));
    COIL_TRY_STATUS(checkNumel(en, *a[0].tensor, prod({planes, inH, inW}), "the input"));
    COIL_TRY_STATUS(checkNumel(en, *a[1].output, prod({planes, outH, outW}), "the output"));
    return kernelStatus(fn(in(a, 0), out(a, 1), planes, inH, inW, outH, outW, a[7].number, a[8].i,
                           a[9].i, a[10].number, a[11].i, a[12].i, a[13].i, a[14].i, a[15].i));
  };
}
} // namespace

void registerCpuResizeEvalExterns() {
  registerEvalExtern(kernels::cpuSymbol(kernels::ExternId::Resize2d, DType::F32),
                     resize2dAdapter(coil_cpu_resize2d_f32));
}

} // namespace coil::loop
