// Type and shape inference for the Elementwise family of ops (see Ops.def).
#include "ir/Infer.h"

namespace coil {

void registerElementwiseInfer(InferRegistry &r) { (void)r; }

} // namespace coil
