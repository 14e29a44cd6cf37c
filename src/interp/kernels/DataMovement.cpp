// Reference kernels for the DataMovement family of ops (see Ops.def).
#include "interp/Kernel.h"

namespace coil {

void registerDataMovementKernels(KernelRegistry &r) { (void)r; }

} // namespace coil
