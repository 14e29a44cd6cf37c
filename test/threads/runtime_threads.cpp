// Concurrency of libcoil_runtime (issue 15), built normally (ctest `runtime-threads`) and with
// ThreadSanitizer (scripts/tsan.sh, ctest `runtime-tsan`): one CPU package run from 8 threads at
// once, while 4 more threads run a second package, with runtime-allocated and caller-owned
// outputs, several input sizes per thread (the arena pool grows and is shared), threads that
// pass bad inputs (coil_last_error is per thread), and a thread that loads and frees a third
// copy of the first package meanwhile. Every output is compared with the one computed alone,
// bit for bit (OMP_NUM_THREADS=1: each run is deterministic).
//
// usage: runtime_threads PKG_MLP PKG_NONZERO   (compiled from examples/mlp.onnx and the NonZero
// model of scripts/tsan.sh; input x [batch, 16] f32 and x [N, 4] f32)
#include <atomic>
#include <coil/coil.h>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<int> g_failures{0};

void failure(const std::string &what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++g_failures;
}

struct Result {
  std::vector<std::vector<char>> bytes;
  std::vector<std::vector<int64_t>> shapes;
  bool operator==(const Result &o) const { return bytes == o.bytes && shapes == o.shapes; }
};

std::vector<float> input(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> x(size_t(rows * cols));
  for (float &v : x) v = dist(rng);
  return x;
}

/// One run; caller-owned outputs when `callerOwned` (sized from a first run's result).
bool run(coil_model *m, const std::vector<float> &x, int64_t rows, int64_t cols, Result *out,
         const Result *sizes = nullptr) {
  int64_t shape[2] = {rows, cols};
  coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
  int64_t n = coil_model_num_outputs(m);
  std::vector<coil_output> outs(size_t(n), coil_output{});
  std::vector<std::vector<char>> buffers(static_cast<size_t>(n));
  if (sizes)
    for (int64_t i = 0; i < n; ++i) {
      buffers[size_t(i)].assign(sizes->bytes[size_t(i)].size() + 64, char(0x5a)); // poisoned
      outs[size_t(i)].data = buffers[size_t(i)].data();
      outs[size_t(i)].capacity = int64_t(buffers[size_t(i)].size());
    }
  if (coil_model_run(m, &in, 1, outs.data(), n) != COIL_OK) {
    failure(std::string("run: ") + coil_last_error());
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    coil_output &o = outs[size_t(i)];
    int64_t numel = 1;
    for (int64_t d = 0; d < o.rank; ++d) numel *= o.shape[d];
    size_t bytes = size_t(numel) * (o.dtype == COIL_DTYPE_I64 ? 8 : 4);
    const char *p = static_cast<const char *>(o.data);
    out->bytes.emplace_back(p, p + bytes);
    out->shapes.emplace_back(o.shape, o.shape + o.rank);
    coil_output_release(&o);
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: runtime_threads PKG_MLP PKG_NONZERO\n");
    return 2;
  }
  coil_model *mlp = nullptr, *nz = nullptr;
  if (coil_model_load(argv[1], &mlp) != COIL_OK || coil_model_load(argv[2], &nz) != COIL_OK) {
    std::fprintf(stderr, "load: %s\n", coil_last_error());
    return 2;
  }
  const int64_t mlpCols = 16, nzCols = 4, rowsChoices[] = {1, 3, 8, 17, 32};
  // References, one thread.
  std::vector<Result> refMlp, refNz;
  std::vector<std::vector<float>> xsMlp, xsNz;
  for (size_t k = 0; k < 5; ++k) {
    int64_t r = rowsChoices[k];
    xsMlp.push_back(input(r, mlpCols, unsigned(100 + k)));
    xsNz.push_back(input(r, nzCols, unsigned(200 + k)));
    refMlp.emplace_back();
    refNz.emplace_back();
    if (!run(mlp, xsMlp[k], r, mlpCols, &refMlp[k]) || !run(nz, xsNz[k], r, nzCols, &refNz[k]))
      return 1;
  }
  const int iters = 40;
  std::vector<std::thread> threads;
  std::atomic<int64_t> runs{0};
  for (int t = 0; t < 8; ++t) // the first package from 8 threads
    threads.emplace_back([&, t] {
      for (int i = 0; i < iters; ++i) {
        size_t k = size_t(t + i) % 5;
        Result got;
        bool callerOwned = (t + i) % 3 == 0;
        if (!run(mlp, xsMlp[k], rowsChoices[k], mlpCols, &got, callerOwned ? &refMlp[k] : nullptr))
          return;
        if (!(got == refMlp[k]))
          failure("mlp thread " + std::to_string(t) + " run " + std::to_string(i) + " differs");
        ++runs;
      }
    });
  for (int t = 0; t < 4; ++t) // the second package at the same time
    threads.emplace_back([&, t] {
      for (int i = 0; i < iters; ++i) {
        size_t k = size_t(t * 2 + i) % 5;
        Result got;
        if (!run(nz, xsNz[k], rowsChoices[k], nzCols, &got)) return;
        if (!(got == refNz[k]))
          failure("nonzero thread " + std::to_string(t) + " run " + std::to_string(i) + " differs");
        ++runs;
      }
    });
  threads.emplace_back([&] { // bad inputs: each thread sees its own error
    std::vector<float> x(3 * 7, 1.0f);
    int64_t shape[2] = {3, 7};
    coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
    for (int i = 0; i < iters; ++i) {
      coil_output o = {};
      if (coil_model_run(mlp, &in, 1, &o, 1) != COIL_ERROR_INVALID_ARGUMENT)
        failure("a wrong shape was accepted");
      else if (!std::strstr(coil_last_error(), "dim 1 must be 16"))
        failure(std::string("another thread's error: ") + coil_last_error());
    }
  });
  threads.emplace_back([&] { // load, run and free a third copy meanwhile
    for (int i = 0; i < 4; ++i) {
      coil_model *m = nullptr;
      if (coil_model_load(argv[1], &m) != COIL_OK) {
        failure(std::string("load: ") + coil_last_error());
        return;
      }
      Result got;
      if (run(m, xsMlp[1], rowsChoices[1], mlpCols, &got) && !(got == refMlp[1]))
        failure("a model loaded meanwhile differs");
      coil_model_free(m);
    }
  });
  for (auto &t : threads) t.join();
  coil_model_free(mlp);
  coil_model_free(nz);
  std::printf("runtime_threads: %lld concurrent runs, %d failures\n", (long long)runs.load(),
              g_failures.load());
  return g_failures.load() == 0 && runs.load() == 12 * iters ? 0 : 1;
}
