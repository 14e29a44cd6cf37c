// Lowerings of the recurrent ops RNN, GRU and LSTM (unrolled over a compile-time sequence
// length; the GEMMs are reductions) and of RotaryEmbedding. Semantics:
// interp/kernels/LinalgRnn.cpp.
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <optional>

namespace coil::loop::spatial {
namespace {

// ------------------------------------------------------------------------- RNN, GRU, LSTM

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The interpreter's activation functions, on a value of type t.
Val applyActivation(BodyBuilder &b, const Activation &a, Val x) {
  DType t = b.dtypeOf(x);
  auto c = [&](double v) { return b.constant(t, v); };
  const std::string &n = a.name;
  if (n == "Tanh") return b.op(ScalarOp::Tanh, x);
  if (n == "Sigmoid") return b.op(ScalarOp::Sigmoid, x);
  if (n == "Relu") return b.op(ScalarOp::Max, x, c(0));
  if (n == "Affine") return b.op(ScalarOp::Add, b.op(ScalarOp::Mul, c(a.alpha), x), c(a.beta));
  if (n == "LeakyRelu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Ge, x, c(0)), x,
                b.op(ScalarOp::Mul, c(a.alpha), x));
  if (n == "ThresholdedRelu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Gt, x, c(a.alpha)), x, c(0));
  if (n == "ScaledTanh")
    return b.op(ScalarOp::Mul, c(a.alpha), b.op(ScalarOp::Tanh, b.op(ScalarOp::Mul, c(a.beta), x)));
  if (n == "HardSigmoid") {
    Val v = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, c(a.alpha), x), c(a.beta));
    return b.op(ScalarOp::Min, b.op(ScalarOp::Max, v, c(0)), c(1));
  }
  if (n == "Elu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Ge, x, c(0)), x,
                b.op(ScalarOp::Mul, c(a.alpha), b.op(ScalarOp::Sub, b.op(ScalarOp::Exp, x), c(1))));
  if (n == "Softsign")
    return b.op(ScalarOp::Div, x, b.op(ScalarOp::Add, c(1), b.op(ScalarOp::Abs, x)));
  // Softplus: log(1 + exp(x))
  return b.op(ScalarOp::Log, b.op(ScalarOp::Add, c(1), b.op(ScalarOp::Exp, x)));
}

Expected<std::vector<Activation>> readActivations(const LowerContext &ctx, Cell cell,
                                                  int64_t dirs) {
  const Attrs &at = attrsOf(ctx);
  std::vector<std::string> names;
  if (at.has("activations")) names = at.getStrings("activations");
  size_t per = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) {
      names.push_back(cell == Cell::Rnn ? "Tanh" : "Sigmoid");
      for (size_t k = 1; k < per; ++k) names.push_back("Tanh");
    }
  }
  if (names.size() == per && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * size_t(dirs))
    return ctx.error("activations must list " + std::to_string(per * size_t(dirs)) +
                     " functions, got " + std::to_string(names.size()));
  auto alphas = at.getFloats("activation_alpha");
  auto betas = at.getFloats("activation_beta");
  static const char *known[] = {"Tanh",      "Sigmoid",         "Relu",       "Affine",
                                "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                                "Elu",       "Softsign",        "Softplus"};
  std::vector<Activation> acts;
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a;
    a.name = names[i];
    if (std::find(std::begin(known), std::end(known), a.name) == std::end(known))
      return ctx.error("unsupported activation '" + a.name + "'");
    double da = a.name == "LeakyRelu" ? 0.01 : a.name == "HardSigmoid" ? 0.2 : 1.0;
    double db = a.name == "HardSigmoid" ? 0.5 : a.name == "ScaledTanh" ? 1.0 : 0.0;
    a.alpha = i < alphas.size() ? alphas[i] : da;
    a.beta = i < betas.size() ? betas[i] : db;
    acts.push_back(a);
  }
  return acts;
}

const char *cellName(Cell c) {
  return c == Cell::Rnn ? "RNN" : c == Cell::Gru ? "GRU" : "LSTM";
}

/// Unrolls the recurrence over the (compile-time) sequence length. Per direction: one
/// reduction projects every time step of X (X W^T); per step, a reduction over the hidden size
/// (h R^T), for GRU without linear_before_reset one more ((r * h) R_h^T), and Pointwise nodes
/// for the new hidden (and cell) state. sequence_lens masks the steps past each batch entry's
/// length (the state is kept, Y is 0) and, for the reverse direction, indexes X indirectly.
Status lowerRecurrent(LowerContext &ctx, Cell cell) {
  const TensorType &xt = ctx.inputType(0), &wt = ctx.inputType(1), &rt = ctx.inputType(2);
  const Attrs &at = attrsOf(ctx);
  int64_t layout = at.getInt("layout", 0);
  std::string dir = at.getString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx.error("direction must be forward, reverse or bidirectional, got '" + dir + "'");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;
  int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  if (xt.rank() != 3 || wt.rank() != 3 || rt.rank() != 3)
    return ctx.error("X, W and R must have rank 3");
  SymInt seqS = layout ? xt.shape[1] : xt.shape[0];
  auto seqC = seqS.maybeConstant();
  if (!seqC)
    return ctx.error(std::string(cellName(cell)) + " with a dynamic sequence length (" +
                     seqS.str() + ") is not supported by the compiler yet");
  int64_t seq = *seqC;
  SymInt batch = layout ? xt.shape[0] : xt.shape[1], in = xt.shape[2];
  SymInt hid = at.has("hidden_size") ? SymInt(at.getInt("hidden_size", 0)) : rt.shape[2];
  COIL_TRY(auto acts, readActivations(ctx, cell, dirs));
  std::optional<double> clip;
  if (at.has("clip")) clip = at.getFloat("clip", 0.0);
  bool linearBeforeReset = at.getInt("linear_before_reset", 0) != 0;
  bool inputForget = at.getInt("input_forget", 0) != 0;
  DType dt = xt.dtype, ct = calcType(dt);
  TensorRef x = ctx.input(0), w = ctx.input(1), r = ctx.input(2);
  std::optional<TensorRef> bias, lens, h0, c0, peep;
  if (ctx.hasInput(3)) bias = ctx.input(3);
  if (ctx.hasInput(4)) lens = ctx.input(4);
  if (ctx.hasInput(5)) h0 = ctx.input(5);
  if (cell == Cell::Lstm && ctx.hasInput(6)) c0 = ctx.input(6);
  if (cell == Cell::Lstm && ctx.hasInput(7)) peep = ctx.input(7);
  SymInt gh = hid * gates;

  auto loadX = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, const SymInt &k) {
    return b.cast(b.load(x, layout ? Syms{bi, t, k} : Syms{t, bi, k}), ct);
  };
  auto clipped = [&](BodyBuilder &b, Val v) {
    if (!clip) return v;
    return b.op(ScalarOp::Min, b.op(ScalarOp::Max, v, b.constant(ct, -*clip)),
                b.constant(ct, *clip));
  };
  // Length of batch entry bi (i64), or nullopt without sequence_lens.
  auto lenOf = [&](BodyBuilder &b, const SymInt &bi) -> Val {
    return b.cast(b.load(*lens, {bi}), DType::I64);
  };

  std::vector<std::vector<TensorRef>> hs(static_cast<size_t>(dirs)), cs(static_cast<size_t>(dirs));
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    const Activation *f = &acts[size_t(d) * acts.size() / size_t(dirs)];
    // X W^T for every time step: [seq, batch, gates * hidden].
    TensorRef xw = ctx.reduce(
        ReduceKind::Sum, ct, ct, {seqS, batch, gh}, {in},
        [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
          return b.op(ScalarOp::Mul, loadX(b, o[0], o[1], rv[0]),
                      b.cast(b.load(w, {d, o[2], rv[0]}), ct));
        },
        false, "xw");
    auto initial = [&](const std::optional<TensorRef> &init) {
      return ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
        if (!init) return b.constant(ct, 0);
        return b.cast(b.load(*init, layout ? Syms{o[0], d, o[1]} : Syms{d, o[0], o[1]}), ct);
      });
    };
    hs[size_t(d)].push_back(initial(h0));
    if (cell == Cell::Lstm) cs[size_t(d)].push_back(initial(c0));
    for (int64_t s = 0; s < seq; ++s) {
      TensorRef h = hs[size_t(d)].back();
      TensorRef hr = ctx.reduce(
          ReduceKind::Sum, ct, ct, {batch, gh}, {hid},
          [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
            return b.op(ScalarOp::Mul, b.load(h, {o[0], rv[0]}),
                        b.cast(b.load(r, {d, o[1], rv[0]}), ct));
          },
          false, "hr");
      // The time step read at batch entry bi.
      auto timeOf = [&](BodyBuilder &b, const SymInt &bi) -> SymInt {
        if (!reverse) return s;
        if (!lens) return seq - 1 - s;
        Val t = b.op(ScalarOp::Sub, lenOf(b, bi), b.intConstant(DType::I64, s + 1));
        return b.indirect(t, seqS, false);
      };
      auto biasAt = [&](BodyBuilder &b, const SymInt &g, int64_t which) {
        if (!bias) return b.constant(ct, 0);
        return b.cast(b.load(*bias, {d, g + gh * which}), ct);
      };
      // Gate g (0-based) at (bi, k): X W^T + Wb and h R^T + Rb.
      auto gateXw = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, int64_t g,
                        const SymInt &k) {
        SymInt gi = hid * g + k;
        return b.op(ScalarOp::Add, b.load(xw, {t, bi, gi}), biasAt(b, gi, 0));
      };
      auto gateHr = [&](BodyBuilder &b, const SymInt &bi, int64_t g, const SymInt &k) {
        SymInt gi = hid * g + k;
        return b.op(ScalarOp::Add, b.load(hr, {bi, gi}), biasAt(b, gi, 1));
      };
      auto gateSum = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, int64_t g,
                         const SymInt &k) {
        return b.op(ScalarOp::Add, gateXw(b, t, bi, g, k), gateHr(b, bi, g, k));
      };
      auto peepAt = [&](BodyBuilder &b, int64_t which, const SymInt &k) {
        if (!peep) return b.constant(ct, 0);
        return b.cast(b.load(*peep, {d, hid * which + k}), ct);
      };
      auto masked = [&](BodyBuilder &b, const SymInt &bi, Val nv, Val old) {
        if (!lens) return nv;
        Val valid = b.op(ScalarOp::Lt, b.intConstant(DType::I64, s), lenOf(b, bi));
        return b.op(ScalarOp::Select, valid, nv, old);
      };
      std::optional<TensorRef> q;
      if (cell == Cell::Gru && !linearBeforeReset) {
        // (r * h) R_h^T with the reset gate recomputed per j, as the interpreter does.
        q = ctx.reduce(
            ReduceKind::Sum, ct, ct, {batch, hid}, {hid},
            [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
              SymInt t = timeOf(b, o[0]);
              Val rj = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 1, rv[0])));
              Val hj = b.load(h, {o[0], rv[0]});
              return b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, rj, hj),
                          b.cast(b.load(r, {d, hid * 2 + o[1], rv[0]}), ct));
            },
            false, "gru_rh");
      }
      std::optional<TensorRef> cNew;
      if (cell == Cell::Lstm) {
        TensorRef c = cs[size_t(d)].back();
        cNew = ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
          SymInt t = timeOf(b, o[0]);
          Val cv = b.load(c, o);
          Val ig = applyActivation(b, f[0],
                                   clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 0, o[1]),
                                                   b.op(ScalarOp::Mul, peepAt(b, 0, o[1]), cv))));
          Val fg =
              inputForget
                  ? b.op(ScalarOp::Sub, b.constant(ct, 1), ig)
                  : applyActivation(b, f[0],
                                    clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 2, o[1]),
                                                    b.op(ScalarOp::Mul, peepAt(b, 2, o[1]), cv))));
          Val cg = applyActivation(b, f[1], clipped(b, gateSum(b, t, o[0], 3, o[1])));
          Val cn = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, fg, cv), b.op(ScalarOp::Mul, ig, cg));
          return masked(b, o[0], cn, cv);
        });
        cs[size_t(d)].push_back(*cNew);
      }
      TensorRef hNew = ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
        SymInt t = timeOf(b, o[0]);
        // The previous state, read only where the cell or the masking needs it.
        Val hv = cell == Cell::Gru || lens ? b.load(h, o) : kNoVal;
        Val nh;
        if (cell == Cell::Rnn) {
          nh = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 0, o[1])));
        } else if (cell == Cell::Gru) {
          Val z = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 0, o[1])));
          Val pre;
          if (linearBeforeReset) {
            Val rg = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 1, o[1])));
            pre = b.op(ScalarOp::Add, gateXw(b, t, o[0], 2, o[1]),
                       b.op(ScalarOp::Mul, rg, gateHr(b, o[0], 2, o[1])));
          } else {
            pre = b.op(ScalarOp::Add, gateXw(b, t, o[0], 2, o[1]),
                       b.op(ScalarOp::Add, biasAt(b, hid * 2 + o[1], 1), b.load(*q, o)));
          }
          Val hh = applyActivation(b, f[1], clipped(b, pre));
          nh = b.op(ScalarOp::Add,
                    b.op(ScalarOp::Mul, b.op(ScalarOp::Sub, b.constant(ct, 1), z), hh),
                    b.op(ScalarOp::Mul, z, hv));
        } else {
          Val cn = b.load(*cNew, o);
          Val og = applyActivation(b, f[0],
                                   clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 1, o[1]),
                                                   b.op(ScalarOp::Mul, peepAt(b, 1, o[1]), cn))));
          nh = b.op(ScalarOp::Mul, og, applyActivation(b, f[2], cn));
        }
        return masked(b, o[0], nh, hv);
      });
      hs[size_t(d)].push_back(hNew);
    }
  }

  // Y: [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]); Y[t] of a direction
  // is the state after the step that read time t, 0 past the batch entry's length.
  if (ctx.numOutputs() > 0 && ctx.gnode().outputs[0] != kNoValue) {
    ctx.setOutput(0, ctx.pointwise(dt, ctx.outputType(0).shape, [&](BodyBuilder &b, const Syms &o) {
      SymInt t = layout ? o[1] : o[0], dv = layout ? o[2] : o[1], bi = layout ? o[0] : o[2],
             k = o[3];
      Val tv = b.index(t), dvv = b.index(dv);
      Val len = lens ? lenOf(b, bi) : b.intConstant(DType::I64, seq);
      Val res = b.constant(ct, 0);
      for (int64_t d = 0; d < dirs; ++d) {
        bool reverse = dir == "reverse" || d == 1;
        // The step s that read time t.
        Val step = reverse ? b.op(ScalarOp::Sub,
                                  b.op(ScalarOp::Sub, len, b.intConstant(DType::I64, 1)), tv)
                           : tv;
        for (int64_t s = 0; s < seq; ++s) {
          Val hit = b.op(ScalarOp::And, b.op(ScalarOp::Eq, dvv, b.intConstant(DType::I64, d)),
                         b.op(ScalarOp::Eq, step, b.intConstant(DType::I64, s)));
          res = b.op(ScalarOp::Select, hit, b.load(hs[size_t(d)][size_t(s + 1)], {bi, k}), res);
        }
      }
      Val valid = b.op(ScalarOp::Lt, tv, len);
      return b.cast(b.op(ScalarOp::Select, valid, res, b.constant(ct, 0)), dt);
    }));
  }
  // Y_h and Y_c: the final states, [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]).
  auto finalState = [&](size_t out, std::vector<std::vector<TensorRef>> &states) {
    if (ctx.numOutputs() <= out || ctx.gnode().outputs[out] == kNoValue) return;
    ctx.setOutput(out,
                  ctx.pointwise(dt, ctx.outputType(out).shape, [&](BodyBuilder &b, const Syms &o) {
                    SymInt dv = layout ? o[1] : o[0], bi = layout ? o[0] : o[1], k = o[2];
                    Val res = b.load(states[0].back(), {bi, k});
                    if (dirs == 2)
                      res = b.op(ScalarOp::Select,
                                 b.op(ScalarOp::Eq, b.index(dv), b.intConstant(DType::I64, 1)),
                                 b.load(states[1].back(), {bi, k}), res);
                    return b.cast(res, dt);
                  }));
  };
  finalState(1, hs);
  if (cell == Cell::Lstm) finalState(2, cs);
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

void registerSpatialRnnLowerings(LowerRegistry &r) {
  r.add(OpKind::RNN, lowerRnn);
  r.add(OpKind::GRU, lowerGru);
  r.add(OpKind::LSTM, lowerLstm);
  r.add(OpKind::RotaryEmbedding, lowerRotaryEmbedding);
}

} // namespace coil::loop::spatial
