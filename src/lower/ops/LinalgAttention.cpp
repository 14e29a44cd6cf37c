// Lowering of Attention: not lowered yet (the decomposition into GEMMs, masks and softmax
// reductions follows).
#include "lower/ops/LinalgLower.h"

namespace coil::loop::linalg {

void registerLinalgAttentionLowerings(LowerRegistry &r) {
  (void)r;
}

} // namespace coil::loop::linalg
