/// libFuzzer target: the .npz reader (libzip archive, .npy headers, dtypes, shapes, Fortran
/// order). Input: the bytes of an .npz file (a plain .npy image is parsed as one too). Every array
/// read must serialize and read back to the same dtype, shape and bytes.
#include "FuzzCheck.h"
#include "io/Npz.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

using namespace coil;

namespace {

void roundTrip(const Tensor &t) {
  auto back = parseNpy(serializeNpy(t), "serialized");
  if (!back) fuzz::die("a serialized array does not parse", back.error().render());
  if (back->dtype() != t.dtype() || back->shape() != t.shape() || back->nbytes() != t.nbytes() ||
      (t.nbytes() && std::memcmp(back->data(), t.data(), t.nbytes()) != 0))
    fuzz::die("round trip", "an array changed through serializeNpy/parseNpy");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  fuzz::guarded([&] {
    auto arrays = readNpzBytes(bytes, "fuzz.npz");
    if (!arrays) {
      fuzz::expectUserError(arrays.error());
    } else {
      for (const auto &[name, t] : *arrays) roundTrip(t);
    }
    auto one = parseNpy(bytes, "fuzz.npy");
    if (!one) return fuzz::expectUserError(one.error());
    roundTrip(*one);
  });
  return 0;
}
