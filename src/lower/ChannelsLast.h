/// \file The channels-last pass: 2-D convolutions read and write channels-last (NHWC) buffers,
/// and the elementwise ops between them follow, so that no layout copy runs between
/// consecutive convolutions.
///
/// Graph IR has no layout: a channels-last tensor is a value of shape [N, H, W, C] and
/// `Transpose(perm 0,3,1,2)` of it is the NCHW tensor ONNX ops expect. Both Transposes are free
/// in the Loop IR (views), so the pass only chooses which shape each value is *computed* in:
///  - every floating Conv with 4-D input and weights gets the attribute kChannelsLastAttr (its
///    lowering then calls the NHWC extern coil_cpu_conv_nhwc_*, reading its input and weights
///    through an NHWC view, and yields the NHWC output node seen as NCHW); constant weights are
///    transposed here once to [M, KH, KW, C/group] so that the extern reads them in place;
///  - the Conv's output gets an NHWC twin, `Transpose(y, perm 0,2,3,1)`;
///  - elementwise ops (unary activations, arithmetic and Min/Max/Sum/Mean, PRelu, Where) whose
///    4-D inputs all have an NHWC twin, and whose other inputs are scalar-like or per-channel
///    constants ([C,1,1] or [1,C,1,1]), are computed in NHWC ([N, H, W, C]) and their output has
///    the NHWC twin only;
///  - MaxPool (without indices) and AveragePool of a value with a twin lower to channels-last
///    nodes too (lower/ops/Spatial.cpp), so their output gets a twin as well;
///  - every other consumer (reshapes, global pooling, graph outputs...) reads the NCHW value,
///    which is created on first use as `Transpose(twin, perm 0,3,1,2)`.
/// The graph's results are unchanged (the same values in the same NCHW shapes); the output is
/// compacted. Requires a verified graph with inferred shapes.
#pragma once

#include "ir/Graph.h"
#include "ir/OpSchema.h"
#include "support/Expected.h"

namespace coil::loop {

/// The integer attribute (1) that marks a Conv to lower through the channels-last extern
/// (declared in ir/OpSchema.h, whose schema of Conv lists it).
using coil::kChannelsLastAttr;

Expected<Graph> convertToChannelsLast(const Graph &g);

} // namespace coil::loop
