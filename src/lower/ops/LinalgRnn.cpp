// Lowerings of the recurrent ops RNN, GRU and LSTM (an extern call for the recurrence) and of
// RotaryEmbedding. Semantics:
// interp/kernels/LinalgRnn.cpp.
#include "kernels/Externs.h"
#include "kernels/cpu/CpuKernels.h"
#include "lower/ops/LinalgLower.h"
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <optional>

namespace coil::loop::spatial {
namespace {

// ------------------------------------------------------------------------- RNN, GRU, LSTM

using Cell = RnnCell;
using Activation = RnnActivation;

const char *cellName(Cell c) {
  return c == Cell::Rnn ? "RNN" : c == Cell::Gru ? "GRU" : "LSTM";
}

static_assert(COIL_CPU_RNN_ACT_TANH == 0 && COIL_CPU_RNN_ACT_SOFTPLUS == 10,
              "the extern's activation codes are the indices of rnnActivationNames()");

/// RNN, GRU and LSTM as one extern call (kernels/cpu coil_cpu_recurrent_*: the recurrence, a
/// loop over the time steps that the sequence length bounds at run time, so a dynamic or long
/// sequence costs no code) around Loop IR nodes: the input projections X W^T of every step and
/// direction (one GEMM extern, [seq, batch, dirs, gates * hidden]), every operand in the compute
/// type and ONNX's layout 0 (absent optional inputs as zeros, sequence_lens as the sequence
/// length), the activations as a small f64 tensor, and views (layout 1) and casts of the results.
Status lowerRecurrent(LowerContext &ctx, Cell cell) {
  using linalg::floatArg;
  using linalg::intArg;
  using linalg::nodeArg;
  using linalg::outArg;
  const TensorType &xt = ctx.inputType(0), &wt = ctx.inputType(1), &rt = ctx.inputType(2);
  COIL_TRY(RnnAttrs ra, decodeRnn(ctx.gnode()));
  int64_t layout = ra.layout, dirs = ra.dirs, gates = ra.gates;
  const std::string &dir = ra.direction;
  if (xt.rank() != 3 || wt.rank() != 3 || rt.rank() != 3)
    return ctx.error("X, W and R must have rank 3");
  SymInt seq = layout ? xt.shape[1] : xt.shape[0];
  SymInt batch = layout ? xt.shape[0] : xt.shape[1], in = xt.shape[2];
  SymInt hid = ra.hiddenSize ? SymInt(*ra.hiddenSize) : rt.shape[2];
  const std::vector<Activation> &acts = ra.activations;
  bool hasClip = ra.clip.has_value();
  double clip = ra.clip.value_or(0.0);
  bool linearBeforeReset = ra.linearBeforeReset, inputForget = ra.inputForget;
  DType dt = xt.dtype, ct = calcType(dt);
  if (ct != DType::F32 && ct != DType::F64)
    return ctx.error(std::string(cellName(cell)) + " computes in f32 or f64, not " +
                     std::string(dtypeName(ct)));
  TensorRef x = ctx.input(0), w = ctx.input(1);
  SymInt gh = hid * gates;
  auto zeros = [&](std::vector<SymInt> shape, const char *hint) {
    return ctx.pointwise(
        ct, std::move(shape), [&](BodyBuilder &b, const Syms &) { return b.constant(ct, 0); },
        hint);
  };
  // Input i (present) in the compute type, realized, of the given layout-0 shape, reading
  // element o at index(o). An input already in the compute type and stored contiguously in
  // that order (a weight, usually) is passed as it is, without a copy per run.
  auto operand = [&](size_t i, std::vector<SymInt> shape,
                     const std::function<Syms(const Syms &)> &index, const char *hint,
                     bool identity = true) {
    TensorRef t = ctx.input(i);
    if (identity && t.dtype == ct && linalg::layoutOf(ctx, t) == linalg::Layout::Plain)
      return linalg::wholeNode(ctx, t);
    return ctx.realize(ctx.pointwise(
        ct, std::move(shape),
        [&](BodyBuilder &b, const Syms &o) { return b.cast(b.load(t, index(o)), ct); }, hint));
  };
  auto same = [](const Syms &o) { return o; };
  // [dirs, batch, hidden] from initial_h / initial_c ([batch, dirs, hidden] with layout 1).
  auto state = [&](size_t i, const char *hint) {
    if (!ctx.hasInput(i)) return zeros({dirs, batch, hid}, hint);
    return operand(
        i, {dirs, batch, hid},
        [&](const Syms &o) {
          return layout ? Syms{o[1], o[0], o[2]} : o;
        },
        hint, layout == 0);
  };

  // X W^T of every step and direction as one GEMM: X as [seq * batch, input] (a view for layout
  // 0; layout 1 and a dtype other than the compute type cost a copy) times W as
  // [dirs * gates * hidden, input] transposed, so xw is [seq, batch, dirs, gates * hidden].
  TensorRef xs = layout ? ctx.permute(x, {1, 0, 2}) : x;
  auto castTo = [&](TensorRef t) {
    if (t.dtype == ct) return t;
    return ctx.realize(ctx.pointwise(
        ct, t.shape, [&](BodyBuilder &b, const Syms &o) { return b.cast(b.load(t, o), ct); }));
  };
  xs = castTo(xs);
  TensorRef wT = ctx.permute(ctx.reshape(castTo(w), {gh * dirs, in}), {1, 0});
  TensorRef xw = linalg::gemmExtern(ctx, ctx.reshape(xs, {seq * batch, in}), wT, {}, seq * batch,
                                    gh * dirs, in, 1.0);
  TensorRef r = operand(2, {dirs, gh, hid}, same, "r");
  TensorRef bias =
      ctx.hasInput(3) ? operand(3, {dirs, gh * 2}, same, "bias") : zeros({dirs, gh * 2}, "bias");
  TensorRef lens;
  if (ctx.hasInput(4)) {
    TensorRef l = ctx.input(4);
    lens = ctx.pointwise(
        DType::I64, {batch},
        [&](BodyBuilder &b, const Syms &o) { return b.cast(b.load(l, o), DType::I64); }, "lens");
  } else {
    lens = ctx.pointwise(
        DType::I64, {batch}, [&](BodyBuilder &b, const Syms &) { return b.index(seq); }, "lens");
  }
  TensorRef h0 = state(5, "h0");
  // initial_c and P are read only by LSTM; the others pass buffers the call ignores.
  TensorRef c0 = cell == Cell::Lstm ? state(6, "c0") : h0;
  TensorRef peep = bias;
  if (cell == Cell::Lstm)
    peep = ctx.hasInput(7) ? operand(7, {dirs, hid * 3}, same, "peep")
                           : zeros({dirs, hid * 3}, "peep");
  // Per direction f, g, h: code, alpha, beta (unused slots Tanh).
  std::vector<double> table(size_t(dirs * 9), 0.0);
  size_t per = acts.size() / size_t(dirs);
  for (int64_t d = 0; d < dirs; ++d)
    for (size_t k = 0; k < per; ++k) {
      const Activation &a = acts[size_t(d) * per + k];
      double *e = &table[size_t(d * 9) + k * 3];
      e[0] = double(rnnActivationCode(a.name));
      e[1] = a.alpha;
      e[2] = a.beta;
    }
  TensorRef actT = ctx.pointwise(
      DType::F64, {dirs * 9},
      [&](BodyBuilder &b, const Syms &o) {
        Val v = b.constant(DType::F64, 0);
        Val i = b.index(o[0]);
        for (size_t k = 0; k < table.size(); ++k)
          if (table[k] != 0)
            v = b.op(ScalarOp::Select, b.op(ScalarOp::Eq, i, b.intConstant(DType::I64, int64_t(k))),
                     b.constant(DType::F64, table[k]), v);
        return v;
      },
      "activations");
  int64_t cellCode = cell == Cell::Rnn   ? COIL_CPU_RNN_CELL_RNN
                     : cell == Cell::Gru ? COIL_CPU_RNN_CELL_GRU
                                         : COIL_CPU_RNN_CELL_LSTM;
  std::vector<TensorRef> outs = ctx.externCall(
      kernels::cpuSymbol(kernels::ExternId::Recurrent, ct == DType::F64 ? DType::F64 : DType::F32),
      {nodeArg(xw),
       nodeArg(r),
       nodeArg(bias),
       nodeArg(ctx.realize(lens)),
       nodeArg(h0),
       nodeArg(c0),
       nodeArg(peep),
       nodeArg(ctx.realize(actT)),
       outArg(0),
       outArg(1),
       outArg(2),
       intArg(cellCode),
       intArg(seq),
       intArg(batch),
       intArg(hid),
       intArg(dirs),
       intArg(dir == "reverse" ? 1 : 0),
       intArg(linearBeforeReset ? 1 : 0),
       intArg(inputForget ? 1 : 0),
       intArg(hasClip ? 1 : 0),
       floatArg(clip)},
      {{ct, {seq, dirs, batch, hid}}, {ct, {dirs, batch, hid}}, {ct, {dirs, batch, hid}}});

  // Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]); Y_h and Y_c
  // [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]); in the op's dtype.
  auto result = [&](size_t i, TensorRef v, const std::vector<int64_t> &perm1) {
    if (ctx.numOutputs() <= i || ctx.gnode().outputs[i] == kNoValue) return;
    if (layout) v = ctx.permute(v, perm1);
    if (dt != ct)
      v = ctx.pointwise(dt, v.shape,
                        [&](BodyBuilder &b, const Syms &o) { return b.cast(b.load(v, o), dt); });
    ctx.setOutput(i, v);
  };
  result(0, outs[0], {2, 0, 1, 3});
  result(1, outs[1], {1, 0, 2});
  if (cell == Cell::Lstm) result(2, outs[2], {1, 0, 2});
  return okStatus();
}

Status lowerRnn(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Rnn);
}
Status lowerGru(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Gru);
}
Status lowerLstm(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Lstm);
}

// ------------------------------------------------------------------------- RotaryEmbedding

Status lowerRotaryEmbedding(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &cosT = ctx.inputType(1), &sinT = ctx.inputType(2);
  const Attrs &at = attrsOf(ctx);
  bool interleaved = at.getInt("interleaved", 0) != 0;
  SymInt headSize;
  int64_t heads = 0;
  if (xt.rank() == 4) {
    headSize = xt.shape[3];
  } else if (xt.rank() == 3) {
    heads = at.getInt("num_heads", 0);
    if (heads < 1) return ctx.error("num_heads must be positive for a rank-3 input");
    headSize = floorDiv(xt.shape[2], heads);
  } else {
    return ctx.error("input 0 must have rank 3 or 4, got rank " + std::to_string(xt.rank()));
  }
  int64_t rdAttr = at.getInt("rotary_embedding_dim", 0);
  SymInt rd = rdAttr == 0 ? headSize : SymInt(rdAttr);
  if (rdAttr % 2 != 0) return ctx.error("rotary_embedding_dim must be even");
  SymInt half = floorDiv(rd, 2);
  if (cosT.rank() < 1 || sinT.rank() < 1)
    return ctx.error("the cos and sin caches must have rank >= 1");
  DType dt = xt.dtype, ct = calcType(dt);
  // Caches as [rows, half]: rows are position ids, or (batch, seq) without position_ids.
  auto flat2d = [&](size_t i) {
    TensorRef t = ctx.input(i);
    if (t.rank() == 2) return t;
    SymInt rows = 1;
    for (int64_t d = 0; d + 1 < t.rank(); ++d) rows = rows * t.shape[size_t(d)];
    return ctx.reshape(t, {rows, t.shape.back()});
  };
  TensorRef x = ctx.input(0), cosC = flat2d(1), sinC = flat2d(2);
  std::optional<TensorRef> pos;
  if (ctx.hasInput(3)) pos = ctx.input(3);
  SymInt seq = xt.rank() == 4 ? xt.shape[2] : xt.shape[1];
  ctx.setOutput(0, ctx.pointwise(dt, xt.shape, [&](BodyBuilder &b, const Syms &o) {
    // Batch, sequence position and the element within the head; `at(e)` is the index of
    // element e of the same head.
    SymInt bi = o[0], si = xt.rank() == 4 ? o[2] : o[1];
    SymInt i = xt.rank() == 4 ? o[3] : floorMod(o[2], headSize);
    auto at = [&](const SymInt &e) {
      Syms idx = o;
      if (xt.rank() == 4)
        idx[3] = e;
      else
        idx[2] = o[2] - i + e;
      return idx;
    };
    SymInt row;
    if (pos)
      row = b.indirect(b.cast(b.load(*pos, {bi, si}), DType::I64), cosC.shape[0], false);
    else
      row = bi * seq + si;
    SymInt ii = min(i, rd - 1), partner, col;
    Val first;
    if (interleaved) {
      partner = ii + 1 - floorMod(ii, 2) * 2;
      col = floorDiv(ii, 2);
      first = b.op(ScalarOp::Eq, b.index(floorMod(ii, 2)), b.intConstant(DType::I64, 0));
    } else {
      partner = floorMod(ii + half, rd);
      col = floorMod(ii, half);
      first = b.op(ScalarOp::Lt, b.index(ii), b.index(half));
    }
    Val xi = b.cast(b.load(x, at(i)), ct), xp = b.cast(b.load(x, at(partner)), ct);
    Val c = b.cast(b.load(cosC, {row, col}), ct), sn = b.cast(b.load(sinC, {row, col}), ct);
    Val rotFirst = b.op(ScalarOp::Sub, b.op(ScalarOp::Mul, c, xi), b.op(ScalarOp::Mul, sn, xp));
    Val rotSecond = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, sn, xp), b.op(ScalarOp::Mul, c, xi));
    Val rot = b.op(ScalarOp::Select, first, rotFirst, rotSecond);
    Val inRot = b.op(ScalarOp::Lt, b.index(i), b.index(rd));
    return b.cast(b.op(ScalarOp::Select, inRot, rot, xi), dt);
  }));
  return okStatus();
}

} // namespace

void registerLinalgRnnLowerings(LowerRegistry &r) {
  r.add(OpKind::RNN, lowerRnn);
  r.add(OpKind::GRU, lowerGru);
  r.add(OpKind::LSTM, lowerLstm);
  r.add(OpKind::RotaryEmbedding, lowerRotaryEmbedding);
}

} // namespace coil::loop::spatial
