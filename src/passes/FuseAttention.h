/// \file Attention fusion: the attention that exporters spell out (MatMul, scale, mask,
/// Softmax, MatMul) becomes one `Attention` node (ONNX opset-23 semantics, which the
/// interpreter defines), so that lowering can run it as one fused kernel without a
/// B x H x S x T score matrix (lower/ops/LinalgAttention.cpp).
///
/// A chain is fused when it is exactly, read from the output back:
///  - Y = MatMul(P', V) where P' is P seen through any of: Cast between float types, Identity,
///    inference Dropout (no mask output), and PyTorch's safe softmax Where(IsNaN(P), 0, P);
///  - P = Softmax(X) over the last axis;
///  - X is the scores seen through, in any order: widening float Casts; additive mask terms
///    Add(X', M) (either operand order); boolean mask terms Where(C, X', n) or Where(C, n, X')
///    with n a scalar -inf, or a scalar of magnitude >= 1e30 (then the term is the additive
///    Where(C, 0, n), equal after rounding), or >= 1e4 when C is the causal triangle (no row
///    is masked everywhere); and scale factors Mul(X', c) / Div(X', c) by scalar constants
///    (no mask term may lie below a scale);
///  - the scores are MatMul(Q', K') with Q' = Q and K' = K^T each possibly scaled by scalar
///    constants (Mul / Div: the form that scales q and k by sqrt(scale) each), the scale being
///    the product of every factor (1 when there is none, as in T5 or a scale folded into the
///    Q projection);
///  - K^T is Transpose(K) with its last two dims swapped (a permutation composed with the
///    transpose it undoes), Reshape(Transpose(Reshape(K))) merging the leading dims around a
///    3-D transpose (the dynamo exporter's form), or anything else (then K = Transpose(K^T));
///  - K and V of the same key heads; heads repeated for grouped-query attention by
///    Reshape(Expand(Unsqueeze(K_kv))) or Reshape(Tile(Unsqueeze(K_kv))) (the head axis
///    repeated in place, as repeat_interleave) become Attention's kv heads, as do key/value
///    heads of 1 broadcast by MatMul;
///  - Q, K, V and Y of rank 4 ([B, H, S, D]), or of rank 2 or 3 (then seen as [N, 1, S, D]).
/// Every intermediate value has no other user and is no graph output; Q, K, V and the scores
/// are floats of one dtype; every mask term broadcasts into the score shape; an additive mask
/// has Q's dtype (a constant one is converted when its values are exact in it). Y may be of a
/// wider float type than Q when V is Cast(V_q) from Q's dtype (TorchScript's f16/bf16 export
/// of scaled_dot_product_attention: softmax and the last MatMul at f32): the Attention runs at
/// Q's dtype with V_q, and its output is widened by a Cast. A mask of rank below 4 (a scalar
/// bias, a bias per key) is reshaped to rank 4.
///
/// Causal masks become is_causal = 1 when they are the top-left causal triangle (key j masked
/// where j > i): a constant triangle, Trilu of a nonzero fill (lower with k = 0, or upper with
/// k = 1 negated), Range-based comparisons (j <= i, i >= j, j < i + 1, ...), or Where / Mul of
/// such a predicate with 0 and a large negative value; only when that is the whole mask, or
/// when it masks with -inf (splitting a finite causal mask off another mask would change rows
/// that the other mask masks everywhere). Other mask terms are combined (Add, And, Where) into
/// one attn_mask. Hugging Face decoders' one term Where(causal and K, 0, fill), K a condition on
/// the keys only and fill finite and at most -1e30 (so that score + fill rounds to fill: a row that
/// K masks at every key it sees is uniform over all keys), is split exactly: is_causal, the key
/// mask Where(K, 0, fill), and those rows (query i before K's first kept key) set to the mean of V
/// over the keys after the Attention. A term that is the broadcast of a narrower one is emitted
/// narrow: a bool condition (or the condition of an additive Where of two scalars) seen through
/// Expand, bool Casts and Ands with a condition true everywhere (a nonzero fill, or an index
/// comparison that holds at every index, such as Hugging Face's q >= 0) becomes that narrower
/// value, so that a padding mask exported as [B, 1, S, T] reaches the Attention as its [B, 1, 1, T]
/// row (the kernels then read one mask row per batch, and no B x S x T mask is made).
///
/// Semantics: the fused graph computes the same values up to rounding (it accumulates in f32 or
/// f64 and rounds once), except in two corners where Attention defines what the explicit graph
/// leaves to NaN: a row whose every key is masked with -inf gives zeros (PyTorch's SDPA gives
/// the same; the explicit softmax gives NaN), and a row holding a NaN after PyTorch's safe
/// softmax propagates the NaN (the explicit graph zeroes it).
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

namespace coil {

/// Requires: a verified graph (constants folded, so that scales are constants). Returns the
/// graph with every recognized attention chain replaced by one Attention node (the chain's
/// output value keeps its id and name) and dead values removed; `*fused` (if given) is the
/// number of chains replaced. Establishes: the graph verifies.
Expected<Graph> fuseAttention(const Graph &g, int *fused = nullptr);

} // namespace coil
