// The reference semantics of a compiled epilogue at one point (see EvtEval.h).
#include "evt/EvtEval.h"

#include "support/DType.h"

namespace coil::evt {

std::vector<double> evaluateOutputs(const Program &p, const VisitorPlan &plan, double accum,
                                    const std::function<double(const Node &)> &load) {
  std::vector<double> v(p.nodes.size(), 0);
  for (int id : plan.topo) {
    const Node &n = p.at(id);
    double x = 0;
    switch (n.kind) {
    case Kind::Accum:
      x = accum;
      break;
    case Kind::Literal:
      x = n.value;
      break;
    case Kind::Src:
    case Kind::AuxLoad:
    case Kind::RowBcast:
    case Kind::ColBcast:
    case Kind::ScalarBcast:
      x = load(n);
      break;
    case Kind::Compute: {
      std::vector<double> a;
      for (int o : n.operands) a.push_back(v[size_t(o)]);
      x = evalOp(n.op, a);
      if (n.op == Op::Cast && n.dtype == DType::F16)
        x = halfToFloat(floatToHalf(float(x)));
      else if (n.op == Op::Cast && n.dtype == DType::BF16)
        x = bf16ToFloat(floatToBf16(float(x)));
      break;
    }
    case Kind::AuxStore:
    case Kind::RowRed:
    case Kind::ColRed:
    case Kind::ScalarRed:
      x = v[size_t(n.operands.at(0))];
      break;
    case Kind::Input:
      break;
    }
    v[size_t(id)] = x;
  }
  std::vector<double> out;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    int s = k < p.outputStores.size() ? p.outputStores[k] : -1;
    if (p.outputs[k].name == "D" && p.dValue >= 0)
      out.push_back(v[size_t(p.dValue)]);
    else
      out.push_back(s >= 0 ? v[size_t(s)] : v[size_t(p.outputs[k].value)]);
  }
  return out;
}

} // namespace coil::evt
