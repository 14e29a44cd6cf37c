// Lowering of the Linalg family (placeholder: no op of the family is lowered yet).
#include "lower/Lower.h"

namespace coil::loop {

void registerLinalgLowerings(LowerRegistry &r) {
  (void)r;
}

} // namespace coil::loop
