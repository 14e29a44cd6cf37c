/// \file CPU kernels that generated code calls as extern functions: GEMM, convolutions, and the
/// ops whose work does not fit a loop nest (sorting, data-dependent output sizes).
///
/// Every function is plain `extern "C"` over raw buffers, and its C signature follows from its
/// Loop IR arguments alone (so that the wrapper backends can declare it), in argument order:
///   an input buffer            `const void *`
///   an output buffer           `void *`
///   an int64 size / attribute  `int64_t`
///   a float attribute          `double`
///   a data-dependent size      `int64_t *` (written by the call)
/// Allocating calls (data-dependent output shapes) take `coil_alloc_fn alloc, void *alloc_ctx`
/// first and their outputs as `void **`: they allocate each output through `alloc` (which may be
/// asked for 0 bytes) and store the pointer, also when the call then fails (the caller frees
/// every non-NULL output). If `alloc` returns NULL for a non-empty output, the call fails.
///
/// Every function returns an `int32_t` status: 0 on success; nonzero when the argument values
/// break the op's rules (e.g. a Reshape target read from a tensor at run time that does not fit,
/// K of TopK above the axis size) or memory runs out. Then coil_cpu_last_error() states the
/// rule and the values ("<op>: ..."), every size it writes is 0 and its outputs hold no result.
///
/// Names are `coil_cpu_<op>_<dtype>` with dtype one of f64 f32 f16 bf16 i64 i32 i16 i8 u64 u32
/// u16 u8 bool. Buffers are contiguous and row-major. The functions are thread-safe (no global
/// mutable state but the per-thread message) and never invoke undefined behaviour on any argument
/// values: a negative size, a size product that overflows, a stride below 1 or an out-of-range
/// attribute makes the call fail (documented per function) instead of reading or writing out of
/// bounds. The caller is responsible only for passing buffers that hold the number of elements
/// the sizes describe. No C++ exception leaves a function: when memory for a workspace runs out,
/// convolutions fall back to direct loops and the other calls fail.
/// Floating results are computed as the reference interpreter defines them where that is cheap
/// (double accumulation for scans and Det); GEMM and convolution accumulate in their own type
/// through BLAS.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Allocator of the outputs of allocating calls: returns `bytes` bytes (aligned to 64) owned by
/// the caller's runtime, or NULL.
typedef void *(*coil_alloc_fn)(void *ctx, size_t bytes);

/// The message of this thread's last failed call (nonzero status): "<op>: <the rule broken,
/// with the values>". Valid until the thread's next call of a coil_cpu_* function.
const char *coil_cpu_last_error(void);

// --- GEMM ------------------------------------------------------------------------------------

/// Batched GEMM: for b in [0, batch): Y_b = alpha * op(A_b) * op(B_b), where
/// A_b = a + b * strideA (elements), op(A_b) is m x k (stored k x m, row-major, when transA),
/// B_b = b + b * strideB, op(B_b) is k x n (stored n x k when transB), and Y_b = y + b*m*n is
/// m x n. A batch stride of 0 broadcasts one matrix over the batch. Fails when a size or stride
/// is negative or a size product overflows. k == 0 writes zeros.
int32_t coil_cpu_gemm_f32(const void *a, const void *b, void *y, int64_t batch, int64_t m,
                          int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA,
                          int64_t strideB, double alpha);
int32_t coil_cpu_gemm_f64(const void *a, const void *b, void *y, int64_t batch, int64_t m,
                          int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA,
                          int64_t strideB, double alpha);
/// As coil_cpu_gemm_*, plus beta * C_b where C_b = c + b * strideC is a contiguous m x n matrix
/// (the lowering realizes C broadcast to m x n; strideC 0 shares it over the batch).
int32_t coil_cpu_gemm_c_f32(const void *a, const void *b, const void *c, void *y, int64_t batch,
                            int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,
                            int64_t strideA, int64_t strideB, int64_t strideC, double alpha,
                            double beta);
int32_t coil_cpu_gemm_c_f64(const void *a, const void *b, const void *c, void *y, int64_t batch,
                            int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,
                            int64_t strideA, int64_t strideB, int64_t strideC, double alpha,
                            double beta);
/// f16 / bf16 GEMMs: the operands are widened to f32, multiplied as coil_cpu_gemm_f32 (f32
/// accumulation) and each result rounded once. Same argument rules.
int32_t coil_cpu_gemm_f16(const void *a, const void *b, void *y, int64_t batch, int64_t m,
                          int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA,
                          int64_t strideB, double alpha);
int32_t coil_cpu_gemm_bf16(const void *a, const void *b, void *y, int64_t batch, int64_t m,
                           int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA,
                           int64_t strideB, double alpha);
int32_t coil_cpu_gemm_c_f16(const void *a, const void *b, const void *c, void *y, int64_t batch,
                            int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,
                            int64_t strideA, int64_t strideB, int64_t strideC, double alpha,
                            double beta);
int32_t coil_cpu_gemm_c_bf16(const void *a, const void *b, const void *c, void *y, int64_t batch,
                             int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,
                             int64_t strideA, int64_t strideB, int64_t strideC, double alpha,
                             double beta);

// --- Convolution -----------------------------------------------------------------------------

/// Convolution (ONNX Conv without bias) of x [n, c, in0, in1, in2] with weights
/// w [m, c/group, k0, k1, k2] into y [n, m, out0, out1, out2], for 1 to 3 spatial dims (`nd`;
/// the sizes of unused trailing dims must be 1, their strides and dilations 1, pads 0).
/// Output position o of dim d reads input o*s_d - p_d + kk*d_d (zero outside [0, in_d)); p_d is
/// the begin padding (the end padding is implied by out_d). Computed per (image, group) as
/// im2col + GEMM. Fails when group < 1 does not divide c and m, when nd is not 1..3, or a size,
/// stride or dilation is out of range (sizes >= 0, strides and dilations >= 1, |pads| < 2^61; a
/// negative pad crops).
int32_t coil_cpu_conv_f32(const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m,
                          int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2,
                          int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1,
                          int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1,
                          int64_t d2, int64_t p0, int64_t p1, int64_t p2);
int32_t coil_cpu_conv_f64(const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m,
                          int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2,
                          int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1,
                          int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1,
                          int64_t d2, int64_t p0, int64_t p1, int64_t p2);
/// Transposed convolution (ONNX ConvTranspose without bias) of x [n, c, in0, in1, in2] with
/// weights w [c, m/group, k0, k1, k2] into y [n, m, out0, out1, out2]: input position i of dim
/// d adds to output i*s_d - p_d + kk*d_d (dropped outside [0, out_d)). Computed per (image,
/// group) as GEMM + col2im. Same argument rules as coil_cpu_conv_*.
int32_t coil_cpu_conv_transpose_f32(const void *x, const void *w, void *y, int64_t n, int64_t c,
                                    int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,
                                    int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0,
                                    int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2,
                                    int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1,
                                    int64_t p2);
int32_t coil_cpu_conv_transpose_f64(const void *x, const void *w, void *y, int64_t n, int64_t c,
                                    int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,
                                    int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0,
                                    int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2,
                                    int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1,
                                    int64_t p2);

/// Convolution with its bias and an optional clamp fused (what Conv with a bias, followed by
/// ReLU or Clip, folds into): y = act(conv(x, w)[b, oc, ...] + bias[oc]), computed as
/// coil_cpu_conv_* (same argument rules), the epilogue applied to each output tile while it is
/// in cache. act applies `v < lo ? lo : v` when bit 0 of `clamp` is set, then `v > hi ? hi : v`
/// when bit 1 is set (NaN passes), in the dtype. Fails when clamp is outside 0..3.
int32_t coil_cpu_conv_bias_f32(const void *x, const void *w, const void *bias, void *y, int64_t n,
                               int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0,
                               int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,
                               int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,
                               int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,
                               int64_t p1, int64_t p2, int64_t clamp, double lo, double hi);
int32_t coil_cpu_conv_bias_f64(const void *x, const void *w, const void *bias, void *y, int64_t n,
                               int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0,
                               int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,
                               int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,
                               int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,
                               int64_t p1, int64_t p2, int64_t clamp, double lo, double hi);

/// f16 / bf16 convolutions, transposed convolutions and convolutions with bias: widened to f32,
/// computed as the f32 functions, each result rounded once (conv_bias adds the bias and applies
/// the clamp in f32, before that rounding). Same argument rules.
#define COIL_CPU_DECLARE_CONV_HALF(S)                                                              \
  int32_t coil_cpu_conv_##S(                                                                       \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);                                 \
  int32_t coil_cpu_conv_transpose_##S(                                                             \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);                                 \
  int32_t coil_cpu_conv_bias_##S(                                                                  \
      const void *x, const void *w, const void *bias, void *y, int64_t n, int64_t c, int64_t m,    \
      int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1,    \
      int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2,    \
      int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2, int64_t clamp,       \
      double lo, double hi);
COIL_CPU_DECLARE_CONV_HALF(f16)
COIL_CPU_DECLARE_CONV_HALF(bf16)
#undef COIL_CPU_DECLARE_CONV_HALF

// --- Det -------------------------------------------------------------------------------------

/// Determinants of `batch` n x n matrices x [batch, n, n] into y [batch], by Gaussian
/// elimination with partial pivoting in double (as the interpreter). Fails on negative sizes.
int32_t coil_cpu_det_f32(const void *x, void *y, int64_t batch, int64_t n);
int32_t coil_cpu_det_f64(const void *x, void *y, int64_t batch, int64_t n);

// --- Recurrent ops (RNN, GRU, LSTM) ---------------------------------------------------------

#define COIL_CPU_RNN_CELL_RNN 0
#define COIL_CPU_RNN_CELL_GRU 1
#define COIL_CPU_RNN_CELL_LSTM 2
// Activation codes (ONNX names: Tanh, Sigmoid, Relu, Affine, LeakyRelu, ThresholdedRelu,
// ScaledTanh, HardSigmoid, Elu, Softsign, Softplus).
#define COIL_CPU_RNN_ACT_TANH 0
#define COIL_CPU_RNN_ACT_SIGMOID 1
#define COIL_CPU_RNN_ACT_RELU 2
#define COIL_CPU_RNN_ACT_AFFINE 3
#define COIL_CPU_RNN_ACT_LEAKY_RELU 4
#define COIL_CPU_RNN_ACT_THRESHOLDED_RELU 5
#define COIL_CPU_RNN_ACT_SCALED_TANH 6
#define COIL_CPU_RNN_ACT_HARD_SIGMOID 7
#define COIL_CPU_RNN_ACT_ELU 8
#define COIL_CPU_RNN_ACT_SOFTSIGN 9
#define COIL_CPU_RNN_ACT_SOFTPLUS 10

/// The recurrence of one ONNX RNN (cell 0), GRU (1) or LSTM (2) layer of `dirs` directions
/// (1 or 2), with G = 1, 3, 4 gates and H = `hidden`, in the layout of ONNX's layout 0 and with
/// every optional input present:
///   xw    [seq, batch, dirs, G*H]  X_t W^T of every time step and direction (no bias)
///   r     [dirs, G*H, H]           R
///   b     [dirs, 2*G*H]            B (Wb then Rb)
///   lens  [batch] int64            sequence_lens, each in [0, seq]
///   h0    [dirs, batch, H]         initial_h
///   c0    [dirs, batch, H]         initial_c (LSTM; not read otherwise)
///   p     [dirs, 3*H]              P (LSTM peepholes; not read otherwise)
///   acts  [dirs, 3, 3] double      per direction the activations f, g, h (those the cell
///                                  uses): code (COIL_CPU_RNN_ACT_*), alpha, beta
///   y     [seq, dirs, batch, H]    Y; 0 at the steps past an entry's length
///   yh    [dirs, batch, H]         Y_h
///   yc    [dirs, batch, H]         Y_c (LSTM; zeros otherwise)
/// Direction 1 of two runs in reverse; with one direction, `reverse` != 0 makes it run in
/// reverse. A reverse direction's step s reads time len - 1 - s. `linear_before_reset` and
/// `input_forget` are the GRU and LSTM attributes; `has_clip` != 0 clips every gate's input to
/// [-clip, clip]. The state and gate arithmetic is in the element type (f32: exp, sigmoid and
/// tanh by polynomials within 2 ulp; f64: libm; the other activations in double). Fails on
/// negative or overflowing sizes, a length out of range, an unknown cell or activation code, or
/// a negative clip.
int32_t coil_cpu_recurrent_f32(const void *xw, const void *r, const void *b, const void *lens,
                               const void *h0, const void *c0, const void *p, const void *acts,
                               void *y, void *yh, void *yc, int64_t cell, int64_t seq,
                               int64_t batch, int64_t hidden, int64_t dirs, int64_t reverse,
                               int64_t linear_before_reset, int64_t input_forget, int64_t has_clip,
                               double clip);
int32_t coil_cpu_recurrent_f64(const void *xw, const void *r, const void *b, const void *lens,
                               const void *h0, const void *c0, const void *p, const void *acts,
                               void *y, void *yh, void *yc, int64_t cell, int64_t seq,
                               int64_t batch, int64_t hidden, int64_t dirs, int64_t reverse,
                               int64_t linear_before_reset, int64_t input_forget, int64_t has_clip,
                               double clip);

// --- Scans and sorting (one function per dtype: f64 f32 f16 bf16 i64 i32 i16 i8 u64 u32 u16
//     u8; TopK, CumSum and CumProd are not defined for bool) --------------------------------

/// CumSum / CumProd of x viewed as [outer, len, inner] along the middle axis into y (same
/// shape). `exclusive` != 0: element j gets the fold of the elements before it (0 or 1 for the
/// first); `reverse` != 0: folds from the end. Floats accumulate in double and round each
/// stored value once; integers accumulate modulo 2^64 and wrap to the type. Fails on negative
/// sizes.
#define COIL_CPU_DECLARE_SCAN(S)                                                                   \
  int32_t coil_cpu_cumsum_##S(const void *x, void *y, int64_t outer, int64_t len, int64_t inner,   \
                              int64_t exclusive, int64_t reverse);                                 \
  int32_t coil_cpu_cumprod_##S(const void *x, void *y, int64_t outer, int64_t len, int64_t inner,  \
                               int64_t exclusive, int64_t reverse);
/// TopK of x viewed as [outer, len, inner] along the middle axis: values [outer, k, inner] (same
/// dtype) and indices [outer, k, inner] (int64), sorted (largest first when `largest` != 0,
/// else smallest first; NaN orders above every number; equal values keep the lower index
/// first). Fails unless 0 <= k <= len.
#define COIL_CPU_DECLARE_TOPK(S)                                                                   \
  int32_t coil_cpu_topk_##S(const void *x, void *values, void *indices, int64_t outer,             \
                            int64_t len, int64_t inner, int64_t k, int64_t largest);
/// The same scans with the axis known only at run time: x has shape `shape` (an int64 buffer of
/// `rank` dims) and the axis is the one element of `axis` (int32 when axisIsI32 != 0, else
/// int64), negative values counting from the end. Fails when the axis is out of range or a
/// dim is negative.
#define COIL_CPU_DECLARE_SCAN_DYN(S)                                                               \
  int32_t coil_cpu_cumsum_dyn_##S(const void *x, const void *axis, const void *shape, void *y,     \
                                  int64_t rank, int64_t axisIsI32, int64_t exclusive,              \
                                  int64_t reverse);                                                \
  int32_t coil_cpu_cumprod_dyn_##S(const void *x, const void *axis, const void *shape, void *y,    \
                                   int64_t rank, int64_t axisIsI32, int64_t exclusive,             \
                                   int64_t reverse);
/// TopK with K known only at run time (the one int64 element of `k`), allocating: values and
/// indices [outer, *count, inner] as coil_cpu_topk_*; *count is K; fails when K is not
/// in [0, len].
#define COIL_CPU_DECLARE_TOPK_DYN(S)                                                               \
  int32_t coil_cpu_topk_dyn_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x,               \
                                const void *k, void **values, void **indices, int64_t *count,      \
                                int64_t outer, int64_t len, int64_t inner, int64_t largest);
#define COIL_CPU_DECLARE_NUMERIC(S)                                                                \
  COIL_CPU_DECLARE_SCAN(S)                                                                         \
  COIL_CPU_DECLARE_TOPK(S) COIL_CPU_DECLARE_SCAN_DYN(S) COIL_CPU_DECLARE_TOPK_DYN(S)
COIL_CPU_DECLARE_NUMERIC(f64)
COIL_CPU_DECLARE_NUMERIC(f32)
COIL_CPU_DECLARE_NUMERIC(f16)
COIL_CPU_DECLARE_NUMERIC(bf16)
COIL_CPU_DECLARE_NUMERIC(i64)
COIL_CPU_DECLARE_NUMERIC(i32)
COIL_CPU_DECLARE_NUMERIC(i16)
COIL_CPU_DECLARE_NUMERIC(i8)
COIL_CPU_DECLARE_NUMERIC(u64)
COIL_CPU_DECLARE_NUMERIC(u32)
COIL_CPU_DECLARE_NUMERIC(u16)
COIL_CPU_DECLARE_NUMERIC(u8)
#undef COIL_CPU_DECLARE_NUMERIC
#undef COIL_CPU_DECLARE_TOPK_DYN
#undef COIL_CPU_DECLARE_SCAN_DYN
#undef COIL_CPU_DECLARE_TOPK
#undef COIL_CPU_DECLARE_SCAN

// --- Data-dependent outputs (allocating; every dtype including bool) --------------------------

/// NonZero: the flat (row-major) indices of the non-zero elements of x [numel], in increasing
/// order, as int64 into *indices [*count] (the lowering unravels them into ONNX's [rank, count]).
/// Floats: -0.0 is zero, NaN is not. Fails on a negative numel.
/// Compress's selection uses the bool version on the condition: coil_cpu_nonzero_bool with
/// numel = min(len(condition), size of the axis).
/// Unique of x viewed as [outer, len, inner], comparing the `len` slices x[:, i, :]
/// lexicographically (NaN above numbers; ONNX Unique with an axis, or flattened when
/// outer = inner = 1): y [outer, *count, inner] holds the distinct slices (in sorted order when
/// `sorted` != 0, else in order of first occurrence), indices [*count] the first occurrence of
/// each, inverse [len] the position in y of every slice, counts [*count] how often each occurs
/// (all int64). Fails on negative sizes.
#define COIL_CPU_DECLARE_DYNAMIC(S)                                                                \
  int32_t coil_cpu_nonzero_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x,                \
                               void **indices, int64_t *count, int64_t numel);                     \
  int32_t coil_cpu_unique_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x, void **y,       \
                              void **indices, void **inverse, void **counts, int64_t *count,       \
                              int64_t outer, int64_t len, int64_t inner, int64_t sorted);
COIL_CPU_DECLARE_DYNAMIC(f64)
COIL_CPU_DECLARE_DYNAMIC(f32)
COIL_CPU_DECLARE_DYNAMIC(f16)
COIL_CPU_DECLARE_DYNAMIC(bf16)
COIL_CPU_DECLARE_DYNAMIC(i64)
COIL_CPU_DECLARE_DYNAMIC(i32)
COIL_CPU_DECLARE_DYNAMIC(i16)
COIL_CPU_DECLARE_DYNAMIC(i8)
COIL_CPU_DECLARE_DYNAMIC(u64)
COIL_CPU_DECLARE_DYNAMIC(u32)
COIL_CPU_DECLARE_DYNAMIC(u16)
COIL_CPU_DECLARE_DYNAMIC(u8)
COIL_CPU_DECLARE_DYNAMIC(bool)
#undef COIL_CPU_DECLARE_DYNAMIC

/// NonMaxSuppression (ONNX) of boxes [batches, nboxes, 4] with scores [batches, classes, nboxes]:
/// *selected [*count, 3] (int64 triples batch, class, box). Per (batch, class): candidates with
/// score > scoreThreshold (every box when `hasScoreThreshold` is 0), highest score first (ties:
/// lower box index first), kept unless their IoU with a kept box exceeds iouThreshold, at most
/// maxPerClass (clamped to >= 0) per class. Boxes are [y1, x1, y2, x2] (corners in any order),
/// or [x_center, y_center, width, height] when centerPointBox != 0. Fails on
/// negative sizes.
int32_t coil_cpu_nms_f32(coil_alloc_fn alloc, void *alloc_ctx, const void *boxes,
                         const void *scores, void **selected, int64_t *count, int64_t batches,
                         int64_t classes, int64_t nboxes, int64_t maxPerClass, double iouThreshold,
                         double scoreThreshold, int64_t hasScoreThreshold, int64_t centerPointBox);
/// NonMaxSuppression with its scalar inputs read at run time: maxOut (int64), iou and
/// scoreThreshold (float) hold `maxCount`, `iouCount`, `scoreCount` elements; a count of 0
/// stands for an absent input (max 0, IoU threshold 0, no score filter), otherwise element 0 is
/// read. Callers pass any buffer (e.g. boxes) for an absent input.
int32_t coil_cpu_nms_dyn_f32(coil_alloc_fn alloc, void *alloc_ctx, const void *boxes,
                             const void *scores, const void *maxOut, const void *iou,
                             const void *scoreThreshold, void **selected, int64_t *count,
                             int64_t batches, int64_t classes, int64_t nboxes, int64_t maxCount,
                             int64_t iouCount, int64_t scoreCount, int64_t centerPointBox);

// --- Output shapes from run-time tensors (CpuShape.cpp) ---------------------------------------

/// Ops of coil_cpu_shape_dims.
#define COIL_SHAPE_RESHAPE 0
#define COIL_SHAPE_UNSQUEEZE 1
#define COIL_SHAPE_SQUEEZE 2
#define COIL_SHAPE_PAD 3
#define COIL_SHAPE_EXPAND 4
#define COIL_SHAPE_TILE 5
#define COIL_SHAPE_CONSTANT_OF_SHAPE 6
#define COIL_SHAPE_SLICE 7
#define COIL_SHAPE_SPLIT 8
#define COIL_SHAPE_ONE_HOT 9
#define COIL_SHAPE_CENTER_CROP_PAD 10
#define COIL_SHAPE_RANGE 11
#define COIL_SHAPE_RESIZE 12
/// The sizes of op `op` whose output shape comes from the run-time int64 vector `values`
/// (`nValues` <= 64 elements) and the input dims `inDims` (`inRank` <= 16 int64), written to
/// s0..s15 (unused ones 0), allocating: `status` gets one int64, 1 when the values follow the
/// op's rules, else 0 with every size 0, and the call fails. Per op (`outRank`: the output rank):
///   RESHAPE: values = target shape (0 copies the input dim unless `attr` (allowzero) is set,
///     one -1 inferred); s = output dims; the element count must match.
///   UNSQUEEZE / SQUEEZE: values = axes; s = output dims (squeezed dims must be 1).
///   PAD: values = pads [2k] (k begins, k ends), axes [k] (distinct, in [-r, r)); s = output
///     dims, begin pads, end pads of every dim (3r <= 16); `attr` 1 for the edge, reflect and
///     wrap modes (which cannot pad an empty region).
///   EXPAND: values = shape broadcast with the input; s = output dims.
///   TILE: values = repeats; s = output dims.  CONSTANT_OF_SHAPE: values = shape; s = it.
///   SLICE: values = starts, ends, axes, steps (k each); s = output dims, the first input index
///     of each dim (ONNX clamping, negative steps included), the step of each dim (3r <= 16).
///   SPLIT: values = split [m], `attr` the axis; s = the m sizes (>= 0, summing to its dim).
///   ONE_HOT: values = depth [1] (>= 1), `attr` the output axis; s = output dims.
///   CENTER_CROP_PAD: values = sizes [k], axes [k]; s = output dims.
///   RANGE: values = start, limit, delta (as f64 bits when `attr` is 1); s0 = the length,
///     max(ceil((limit - start) / delta), 0) (delta != 0, under 2^40).
///   RESIZE: `inDims` = the dims of the r resized axes; values = their scales as f64 bits
///     (`attr` 0: s = floor(scale * dim)) or sizes (`attr` 1 stretch: s = sizes; 2 not_larger,
///     3 not_smaller: s = the dims times the min / max of sizes / dims, rounded), then s[r..2r)
///     = the sizes (0 for scales); an empty axis cannot grow. `attr` + 4 * support (1 linear,
///     2 cubic) with antialias: s[2r..3r) = the filter's taps per axis (3r <= 16).
int32_t coil_cpu_shape_dims(coil_alloc_fn alloc, void *alloc_ctx, const void *values,
                            const void *inDims, void **status, int64_t *s0, int64_t *s1,
                            int64_t *s2, int64_t *s3, int64_t *s4, int64_t *s5, int64_t *s6,
                            int64_t *s7, int64_t *s8, int64_t *s9, int64_t *s10, int64_t *s11,
                            int64_t *s12, int64_t *s13, int64_t *s14, int64_t *s15, int64_t op,
                            int64_t nValues, int64_t inRank, int64_t outRank, int64_t attr);

// --- Reduce* with run-time axes (allocating; every dtype including bool) ----------------------

/// Reduce* of x (rank `rank` <= 8, dims d0..d{rank-1}; the unused dims are ignored) over the
/// `naxes` int64 axes in `axes` (negative ones count from the end). `kind` selects the
/// reduction: 0 Sum, 1 SumSquare, 2 L1, 3 L2, 4 LogSum, 5 LogSumExp, 6 Max, 7 Min, 8 Mean,
/// 9 Prod (4 and 5 for floats only). No axes reduce every dim, or copy x when
/// noopWithEmptyAxes != 0. The result *y is allocated through `alloc`; its dims are written to
/// *y0.. in order (x's dims with the reduced ones 1 when keepdims != 0, else without them) and
/// the unused ones of the 8 are 1. Arithmetic as the interpreter: floats in double, rounded once;
/// integers exact modulo 2^64, wrapped to the type; empty reductions give the identity (the
/// lowest / highest value for Max / Min; Mean of nothing is NaN, 0 for integers). Fails (every
/// dim 0) when an axis is out of range or repeated, rank is not in [0, 8], a dim is
/// negative or the sizes overflow, or `kind` is not valid for the dtype.
#define COIL_CPU_DECLARE_REDUCE_DYN(S)                                                             \
  int32_t coil_cpu_reduce_dyn_##S(                                                                 \
      coil_alloc_fn alloc, void *alloc_ctx, const void *x, const void *axes, void **y,             \
      int64_t *y0, int64_t *y1, int64_t *y2, int64_t *y3, int64_t *y4, int64_t *y5, int64_t *y6,   \
      int64_t *y7, int64_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4,       \
      int64_t d5, int64_t d6, int64_t d7, int64_t naxes, int64_t kind, int64_t keepdims,           \
      int64_t noopWithEmptyAxes);
COIL_CPU_DECLARE_REDUCE_DYN(f64)
COIL_CPU_DECLARE_REDUCE_DYN(f32)
COIL_CPU_DECLARE_REDUCE_DYN(f16)
COIL_CPU_DECLARE_REDUCE_DYN(bf16)
COIL_CPU_DECLARE_REDUCE_DYN(i64)
COIL_CPU_DECLARE_REDUCE_DYN(i32)
COIL_CPU_DECLARE_REDUCE_DYN(i16)
COIL_CPU_DECLARE_REDUCE_DYN(i8)
COIL_CPU_DECLARE_REDUCE_DYN(u64)
COIL_CPU_DECLARE_REDUCE_DYN(u32)
COIL_CPU_DECLARE_REDUCE_DYN(u16)
COIL_CPU_DECLARE_REDUCE_DYN(u8)
COIL_CPU_DECLARE_REDUCE_DYN(bool)
#undef COIL_CPU_DECLARE_REDUCE_DYN

// --- GEMM with a bias epilogue ----------------------------------------------------------

/// GEMM with a per-output-column bias and an optional ReLU (what a MatMul or Gemm followed by
/// Add of an [n] bias, and Relu, folds into): for b in [0, batch), Y_b[i, j] =
/// act(alpha * (op(A_b) op(B_b))[i, j] + bias[j]), with A, B, Y and the argument rules of
/// coil_cpu_gemm_*; `bias` has n elements of Y's dtype; act is ReLU (`v < 0 ? 0 : v`, NaN kept)
/// when relu != 0, else the identity. Rounding: f32/f64 round the product, then the sum with the
/// bias, in the dtype (as the unfused GEMM + Add); f16/bf16 add the bias to the f32 product and
/// round once to the dtype (the unfused program rounds the product to the dtype first).
int32_t coil_cpu_gemm_bias_f32(const void *a, const void *b, const void *bias, void *y,
                               int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,
                               int64_t transB, int64_t strideA, int64_t strideB, double alpha,
                               int64_t relu);
int32_t coil_cpu_gemm_bias_f64(const void *a, const void *b, const void *bias, void *y,
                               int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,
                               int64_t transB, int64_t strideA, int64_t strideB, double alpha,
                               int64_t relu);
int32_t coil_cpu_gemm_bias_f16(const void *a, const void *b, const void *bias, void *y,
                               int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,
                               int64_t transB, int64_t strideA, int64_t strideB, double alpha,
                               int64_t relu);
int32_t coil_cpu_gemm_bias_bf16(const void *a, const void *b, const void *bias, void *y,
                                int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,
                                int64_t transB, int64_t strideA, int64_t strideB, double alpha,
                                int64_t relu);

// --- Channels-last convolution ----------------------------------------------------------------

/// Convolution (ONNX Conv without bias) in channels-last layout: x [n, in0, in1, in2, c],
/// weights w [m, k0, k1, k2, c/group] (the ONNX weights with the input channel moved last),
/// y [n, out0, out1, out2, m]; the unused leading spatial dims are 1 as in coil_cpu_conv_*
/// (same geometry arguments and rules: `nd` 1 to 3, p the begin pads). Per (image, group)
/// im2col + GEMM; a pointwise convolution of one group is one GEMM over all images. f16/bf16 are
/// widened to f32 and each result rounded once.
#define COIL_CPU_DECLARE_CONV_NHWC(S)                                                              \
  int32_t coil_cpu_conv_nhwc_##S(                                                                  \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);
/// Channels-last convolution with its bias and an optional clamp fused (lower/FoldConvBias.h):
/// y[b, o..., oc] = act(conv(x, w)[b, o..., oc] + bias[oc]), act as coil_cpu_conv_bias_* (bit 0
/// of `clamp`: `v < lo ? lo : v`, then bit 1: `v > hi ? hi : v`; NaN passes), in the dtype for
/// f32/f64 and in f32 before the one rounding for f16/bf16. Fails when clamp is outside 0..3.
#define COIL_CPU_DECLARE_CONV_NHWC_BIAS(S)                                                         \
  int32_t coil_cpu_conv_nhwc_bias_##S(                                                             \
      const void *x, const void *w, const void *bias, void *y, int64_t n, int64_t c, int64_t m,    \
      int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1,    \
      int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2,    \
      int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2, int64_t clamp,       \
      double lo, double hi);
COIL_CPU_DECLARE_CONV_NHWC(f64)
COIL_CPU_DECLARE_CONV_NHWC(f32)
COIL_CPU_DECLARE_CONV_NHWC(f16)
COIL_CPU_DECLARE_CONV_NHWC(bf16)
COIL_CPU_DECLARE_CONV_NHWC_BIAS(f64)
COIL_CPU_DECLARE_CONV_NHWC_BIAS(f32)
COIL_CPU_DECLARE_CONV_NHWC_BIAS(f16)
COIL_CPU_DECLARE_CONV_NHWC_BIAS(bf16)
#undef COIL_CPU_DECLARE_CONV_NHWC_BIAS
#undef COIL_CPU_DECLARE_CONV_NHWC

// --- Fused attention (CpuAttention.cpp) -------------------------------------------------------

/// Scaled dot-product attention over strided Q, K, V, fused: rows of queries against blocks of
/// keys with an online softmax, so no seqQ x seqK matrix is ever stored (the contract shared
/// with the CUDA twin coil_cuda_attention_*, /work/ATTENTION-ABI.md). Every size and stride is
/// in elements; for b < batch, h < heads, i < seqQ, with g = heads / kvHeads and hk = h / g:
///  - Q[b,h,i,d] = q[qOffset + b*qStrideB + h*qStrideH + i*qStrideS + d] (d < headDim; the
///    last dim is contiguous), K[b,hk,j,d] and V[b,hk,j,e] (e < headDimV) likewise with their
///    own offsets and strides, for j < seqK; Y[b,h,i,e] = y[b*yStrideB + h*yStrideH +
///    i*yStrideS + e]. Strides are non-negative; 0 broadcasts.
///  - s_j = scale * dot(Q[b,h,i,:], K[b,hk,j,:]), accumulated in f32 (f64 for f64); when
///    softcap > 0, s_j = softcap * tanh(s_j / softcap).
///  - maskKind 0: no mask (`mask` is not read); 1: a bool mask of 1-byte elements, key j masked
///    where mask[maskOffset + b*maskStrideB + h*maskStrideH + i*maskStrideQ + j*maskStrideK] is
///    0; 2: an additive mask of the tensors' type at the same place, added to s_j (a -inf
///    element masks the key, whatever s_j is).
///  - causal != 0: key j is masked where j > i + causalOffset (0: top-left aligned as
///    PyTorch's is_causal; seqK - seqQ: bottom-right aligned).
///  - p = softmax over the unmasked keys of s_j (max-subtracted, in f32 / f64); a row with every
///    key masked, or whose scores are all -inf, gives Y[b,h,i,:] = 0, never NaN; NaN inputs
///    propagate. Y[b,h,i,e] = sum_j p_j * V[b,hk,j,e], accumulated in f32 (f64), rounded once.
/// Fails when a size, an offset or stride of Q, K, V or Y, or (maskKind != 0) of the mask is
/// negative, kvHeads is 0 while heads is not, heads is not a multiple of kvHeads, maskKind is
/// not 0, 1 or 2, or the largest element index of a tensor overflows int64. A causalOffset
/// beyond the sizes is clamped (it keeps every key or none). Zero-size outputs are a no-op;
/// seqK == 0 writes zeros.
#define COIL_CPU_DECLARE_ATTENTION(S)                                                              \
  int32_t coil_cpu_attention_##S(                                                                  \
      const void *q, const void *k, const void *v, const void *mask, void *y, int64_t batch,       \
      int64_t heads, int64_t kvHeads, int64_t seqQ, int64_t seqK, int64_t headDim,                 \
      int64_t headDimV, int64_t qOffset, int64_t qStrideB, int64_t qStrideH, int64_t qStrideS,     \
      int64_t kOffset, int64_t kStrideB, int64_t kStrideH, int64_t kStrideS, int64_t vOffset,      \
      int64_t vStrideB, int64_t vStrideH, int64_t vStrideS, int64_t yStrideB, int64_t yStrideH,    \
      int64_t yStrideS, int64_t maskKind, int64_t maskOffset, int64_t maskStrideB,                 \
      int64_t maskStrideH, int64_t maskStrideQ, int64_t maskStrideK, int64_t causal,               \
      int64_t causalOffset, double scale, double softcap);
COIL_CPU_DECLARE_ATTENTION(f64)
COIL_CPU_DECLARE_ATTENTION(f32)
COIL_CPU_DECLARE_ATTENTION(f16)
COIL_CPU_DECLARE_ATTENTION(bf16)
#undef COIL_CPU_DECLARE_ATTENTION

// --- Resize of the two innermost axes (CpuResize.cpp) ------------------------------------------

/// Resize codes: the mode, coordinate_transformation_mode and nearest_mode of ONNX Resize.
#define COIL_RESIZE_NEAREST 0
#define COIL_RESIZE_LINEAR 1
#define COIL_RESIZE_HALF_PIXEL 0
#define COIL_RESIZE_PYTORCH_HALF_PIXEL 1
#define COIL_RESIZE_ALIGN_CORNERS 2
#define COIL_RESIZE_ASYMMETRIC 3
#define COIL_RESIZE_HALF_PIXEL_SYMMETRIC 4
#define COIL_RESIZE_ROUND_PREFER_FLOOR 0
#define COIL_RESIZE_ROUND_PREFER_CEIL 1
#define COIL_RESIZE_FLOOR 2
#define COIL_RESIZE_CEIL 3

/// ONNX Resize (no antialias, exclude_outside 0, not tf_crop_and_resize) of the two innermost
/// axes of x [planes, inH, inW] into y [planes, outH, outW], with the reference interpreter's
/// semantics (source coordinates and weights in f64, tap indices clamped into the input). The
/// scale of each axis is num / den when den > 0 (sizes given), else `scale`. Linear blends the
/// H axis first, then W, in f32, skipping taps of weight 0. Fails on negative or overflowing
/// sizes, an empty input axis with a non-empty output, or an unknown mode code.
int32_t coil_cpu_resize2d_f32(const void *x, void *y, int64_t planes, int64_t inH, int64_t inW,
                              int64_t outH, int64_t outW, double scaleH, int64_t numH, int64_t denH,
                              double scaleW, int64_t numW, int64_t denW, int64_t mode,
                              int64_t coord, int64_t nearestMode);

#ifdef __cplusplus
} // extern "C"
#endif
