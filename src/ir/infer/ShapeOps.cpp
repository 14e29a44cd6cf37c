// Type and shape inference for the ShapeOps family of ops (see Ops.def).
#include "ir/Infer.h"

namespace coil {

void registerShapeOpsInfer(InferRegistry &r) { (void)r; }

} // namespace coil
