// Type and shape inference for the Linalg family of ops (see Ops.def).
#include "ir/Infer.h"

namespace coil {

void registerLinalgInfer(InferRegistry &r) { (void)r; }

} // namespace coil
