#include "lower/LoopIR.h"

#include "support/Check.h"

namespace coil::loop {

const char *scalarOpName(ScalarOp op) {
  switch (op) {
#define COIL_SCALAR_OP_NAME(E, A)                                                                  \
  case ScalarOp::E:                                                                                \
    return #E;
    COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_NAME)
#undef COIL_SCALAR_OP_NAME
  }
  COIL_UNREACHABLE("unknown scalar op");
  return "";
}

int scalarOpArity(ScalarOp op) {
  switch (op) {
#define COIL_SCALAR_OP_ARITY(E, A)                                                                 \
  case ScalarOp::E:                                                                                \
    return A;
    COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_ARITY)
#undef COIL_SCALAR_OP_ARITY
  }
  COIL_UNREACHABLE("unknown scalar op");
  return 0;
}

const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Prod:
    return "prod";
  case ReduceKind::Max:
    return "max";
  case ReduceKind::Min:
    return "min";
  case ReduceKind::ArgMax:
    return "argmax";
  case ReduceKind::ArgMin:
    return "argmin";
  case ReduceKind::Any:
    return "any";
  case ReduceKind::All:
    return "all";
  }
  COIL_UNREACHABLE("unknown reduce kind");
  return "";
}

std::string loopVar(int i) {
  return "%x" + std::to_string(i);
}
std::string reduceVar(int i) {
  return "%r" + std::to_string(i);
}

} // namespace coil::loop
