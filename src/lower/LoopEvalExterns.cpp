// Evaluator adapters of the CPU kernels (kernels/cpu): none registered yet.
#include "lower/LoopEval.h"

namespace coil::loop {

void registerCpuKernelEvalExterns() {}

} // namespace coil::loop
