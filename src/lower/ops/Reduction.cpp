// Lowering of the Reduction family (placeholder: no op of the family is lowered yet).
#include "lower/Lower.h"

namespace coil::loop {

void registerReductionLowerings(LowerRegistry &r) {
  (void)r;
}

} // namespace coil::loop
