// Lowering of the DataMovement family (placeholder: no op of the family is lowered yet).
#include "lower/Lower.h"

namespace coil::loop {

void registerDataMovementLowerings(LowerRegistry &r) {
  (void)r;
}

} // namespace coil::loop
