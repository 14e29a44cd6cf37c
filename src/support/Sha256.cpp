// SHA-256 through OpenSSL's EVP interface (libcrypto 3).
#include "support/Sha256.h"

#include "support/Check.h"

#include <openssl/evp.h>

namespace coil {

namespace {
std::string toHex(const unsigned char *d, unsigned n) {
  static const char digits[] = "0123456789abcdef";
  std::string s(size_t(n) * 2, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}
} // namespace

struct Sha256::State {
  EVP_MD_CTX *ctx = nullptr;
  bool done = false;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  COIL_CHECK(state_->ctx && EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) == 1)
      << "libcrypto: cannot start a SHA-256 digest";
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(state_->ctx);
}

Sha256 &Sha256::update(const void *data, size_t size) {
  COIL_CHECK(!state_->done) << "Sha256::update after hex()";
  // EVP takes any size; chunks keep each call's work bounded.
  const auto *p = static_cast<const unsigned char *>(data);
  while (size > 0) {
    size_t n = size < (size_t(1) << 30) ? size : (size_t(1) << 30);
    COIL_CHECK(EVP_DigestUpdate(state_->ctx, p, n) == 1) << "libcrypto: SHA-256 update failed";
    p += n;
    size -= n;
  }
  return *this;
}

std::string Sha256::hex() {
  COIL_CHECK(!state_->done) << "Sha256::hex called twice";
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  COIL_CHECK(EVP_DigestFinal_ex(state_->ctx, d, &n) == 1 && n == 32)
      << "libcrypto: SHA-256 final failed";
  state_->done = true;
  return toHex(d, n);
}

std::string sha256Hex(const void *data, size_t size) {
  return Sha256().update(data, size).hex();
}

bool isSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

} // namespace coil
