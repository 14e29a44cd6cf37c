// Type and shape inference for the Reduction family of ops (see Ops.def).
#include "ir/Infer.h"

namespace coil {

void registerReductionInfer(InferRegistry &r) { (void)r; }

} // namespace coil
