#include "wrapper/PlaceExterns.h"

#include "kernels/Externs.h"

namespace coil::wrapper {

namespace {

/// The place of a call of `function` and the function it calls there.
Status place(const WrapperProgram &p, std::string &function, ExternPlace &where) {
  std::optional<kernels::ExternRef> r = kernels::findExtern(function);
  if (!r)
    return Error::internal("wrapper '" + p.name + "': extern function '" + function +
                           "' is not in the extern table (kernels/Externs.def)");
  if (r->cuda)
    return Error::internal("wrapper '" + p.name + "': extern function '" + function +
                           "' is a CUDA twin before placement");
  where = ExternPlace::kHost;
  if (p.device != "cuda" || r->info().allocates) return okStatus();
  std::string twin = kernels::cudaSymbol(r->id, r->dtype);
  if (twin.empty()) return okStatus();
  function = std::move(twin);
  where = ExternPlace::kDevice;
  return okStatus();
}

} // namespace

Status placeExterns(WrapperProgram &p) {
  for (Line &l : p.lines) {
    if (auto *e = std::get_if<ExternKernelOut>(&l))
      COIL_TRY_STATUS(place(p, e->function, e->place));
    if (auto *e = std::get_if<ExternKernelAlloc>(&l))
      COIL_TRY_STATUS(place(p, e->function, e->place));
  }
  return okStatus();
}

} // namespace coil::wrapper
