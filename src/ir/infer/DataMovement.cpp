// Type and shape inference for the DataMovement family of ops (see Ops.def).
#include "ir/Infer.h"

namespace coil {

void registerDataMovementInfer(InferRegistry &r) { (void)r; }

} // namespace coil
