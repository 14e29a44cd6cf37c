// cuDNN loaded at run time: the library search, the resolved functions, the version check.
#include "kernels/cuda/CudnnLoader.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <glob.h>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <vector>

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#include <type_traits>
// The declarations of CudnnLoader.h against the real headers, where they exist.
namespace coil::cuda::dnn {
static_assert(CUDNN_STATUS_SUCCESS == kSuccess);
static_assert(CUDNN_DATA_FLOAT == kDataFloat && CUDNN_DATA_DOUBLE == kDataDouble &&
              CUDNN_DATA_HALF == kDataHalf && CUDNN_DATA_BFLOAT16 == kDataBfloat16);
static_assert(CUDNN_DEFAULT_MATH == kDefaultMath && CUDNN_TENSOR_OP_MATH == kTensorOpMath &&
              CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION == kTensorOpMathAllowConversion &&
              CUDNN_FMA_MATH == kFmaMath);
static_assert(CUDNN_TENSOR_NCHW == kTensorNchw && CUDNN_TENSOR_NHWC == kTensorNhwc &&
              CUDNN_CROSS_CORRELATION == kCrossCorrelation);
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == kFwdAlgoImplicitPrecompGemm &&
              CUDNN_ACTIVATION_RELU == kActivationRelu &&
              CUDNN_ACTIVATION_IDENTITY == kActivationIdentity &&
              CUDNN_PROPAGATE_NAN == kPropagateNan);
static_assert(sizeof(cudnnActivationMode_t) == sizeof(int) &&
              sizeof(cudnnNanPropagation_t) == sizeof(int) &&
              sizeof(cudnnConvolutionFwdAlgo_t) == sizeof(int));
static_assert(sizeof(cudnnStatus_t) == sizeof(Status) && sizeof(cudnnDataType_t) == sizeof(int));
static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(AlgoPerf) &&
              offsetof(cudnnConvolutionFwdAlgoPerf_t, memory) == offsetof(AlgoPerf, memory) &&
              offsetof(cudnnConvolutionFwdAlgoPerf_t, mathType) == offsetof(AlgoPerf, mathType));
static_assert(sizeof(cudnnConvolutionBwdDataAlgoPerf_t) == sizeof(AlgoPerf) &&
              offsetof(cudnnConvolutionBwdDataAlgoPerf_t, memory) == offsetof(AlgoPerf, memory) &&
              offsetof(cudnnConvolutionBwdDataAlgoPerf_t, mathType) ==
                  offsetof(AlgoPerf, mathType));
} // namespace coil::cuda::dnn
#endif

namespace coil::cuda::dnn {
namespace {

constexpr const char *kSoname = "libcudnn.so.9";

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Directories that may hold pip's nvidia cuDNN wheel, most specific first.
std::vector<std::string> candidateDirs() {
  std::vector<std::string> packageRoots; // site-packages / dist-packages directories
  auto globInto = [&](const std::string &pattern) {
    glob_t g{};
    if (::glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &g) == 0) {
      std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
      // Newest Python first (glob sorts ascending by name).
      std::sort(found.begin(), found.end(), std::greater<>());
      packageRoots.insert(packageRoots.end(), found.begin(), found.end());
    }
    ::globfree(&g);
  };
  auto prefix = [&](const std::string &p) {
    if (p.empty()) return;
    globInto(p + "/lib/python3*/site-packages");
    globInto(p + "/lib/python3*/dist-packages");
    globInto(p + "/lib/python3/dist-packages");
  };
  if (const char *v = std::getenv("VIRTUAL_ENV")) prefix(v);
  if (const char *v = std::getenv("CONDA_PREFIX")) prefix(v);
  if (const char *v = std::getenv("PYTHONPATH")) {
    std::string s = v;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) packageRoots.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  if (const char *v = std::getenv("HOME")) prefix(std::string(v) + "/.local");
  prefix("/usr/local");
  prefix("/usr");
  prefix("/opt/conda");
  std::vector<std::string> dirs;
  for (const std::string &root : packageRoots)
    for (const char *sub : {"/nvidia/cudnn/lib", "/nvidia/cu13/lib", "/nvidia/cu12/lib"})
      dirs.push_back(root + sub);
  return dirs;
}

/// dlopen of a full path; also loads libcudnn_cnn.so.9 of the same directory first, so the
/// sub-libraries come from there.
void *openPath(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    std::string cnn = path.substr(0, slash) + "/libcudnn_cnn.so.9";
    if (isFile(cnn)) (void)::dlopen(cnn.c_str(), RTLD_LAZY | RTLD_LOCAL); // kept loaded
  }
  return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
}

struct Loaded {
  Api api;
  bool ok = false;
  std::string message;
};

template <typename F> bool resolve(void *lib, const char *name, F &slot, std::string &missing) {
  slot = reinterpret_cast<F>(::dlsym(lib, name));
  if (!slot && missing.empty()) missing = name;
  return slot != nullptr;
}

/// Resolves every function of Api from `lib`; false (with the message) when one is missing or
/// the version is below 9.
bool bind(void *lib, Api &a, std::string &message) {
  std::string missing;
  size_t (*getVersion)() = nullptr;
  resolve(lib, "cudnnGetVersion", getVersion, missing);
  resolve(lib, "cudnnGetErrorString", a.getErrorString, missing);
  resolve(lib, "cudnnCreate", a.create, missing);
  resolve(lib, "cudnnDestroy", a.destroy, missing);
  resolve(lib, "cudnnSetStream", a.setStream, missing);
  resolve(lib, "cudnnCreateTensorDescriptor", a.createTensorDescriptor, missing);
  resolve(lib, "cudnnSetTensorNdDescriptor", a.setTensorNdDescriptor, missing);
  resolve(lib, "cudnnDestroyTensorDescriptor", a.destroyTensorDescriptor, missing);
  resolve(lib, "cudnnCreateFilterDescriptor", a.createFilterDescriptor, missing);
  resolve(lib, "cudnnSetFilterNdDescriptor", a.setFilterNdDescriptor, missing);
  resolve(lib, "cudnnDestroyFilterDescriptor", a.destroyFilterDescriptor, missing);
  resolve(lib, "cudnnCreateConvolutionDescriptor", a.createConvolutionDescriptor, missing);
  resolve(lib, "cudnnSetConvolutionNdDescriptor", a.setConvolutionNdDescriptor, missing);
  resolve(lib, "cudnnSetConvolutionGroupCount", a.setConvolutionGroupCount, missing);
  resolve(lib, "cudnnSetConvolutionMathType", a.setConvolutionMathType, missing);
  resolve(lib, "cudnnDestroyConvolutionDescriptor", a.destroyConvolutionDescriptor, missing);
  resolve(lib, "cudnnGetConvolutionNdForwardOutputDim", a.getConvolutionNdForwardOutputDim,
          missing);
  resolve(lib, "cudnnGetConvolutionForwardAlgorithm_v7", a.getConvolutionForwardAlgorithmV7,
          missing);
  resolve(lib, "cudnnGetConvolutionForwardWorkspaceSize", a.getConvolutionForwardWorkspaceSize,
          missing);
  resolve(lib, "cudnnConvolutionForward", a.convolutionForward, missing);
  resolve(lib, "cudnnGetConvolutionBackwardDataAlgorithm_v7",
          a.getConvolutionBackwardDataAlgorithmV7, missing);
  resolve(lib, "cudnnGetConvolutionBackwardDataWorkspaceSize",
          a.getConvolutionBackwardDataWorkspaceSize, missing);
  resolve(lib, "cudnnConvolutionBackwardData", a.convolutionBackwardData, missing);
  if (!missing.empty()) {
    message = "function " + missing + " not found";
    return false;
  }
  // The fused convolution with bias and activation: optional (hasFusedBias()).
  std::string optional;
  resolve(lib, "cudnnCreateActivationDescriptor", a.createActivationDescriptor, optional);
  resolve(lib, "cudnnSetActivationDescriptor", a.setActivationDescriptor, optional);
  resolve(lib, "cudnnDestroyActivationDescriptor", a.destroyActivationDescriptor, optional);
  resolve(lib, "cudnnConvolutionBiasActivationForward", a.convolutionBiasActivationForward,
          optional);
  a.version = getVersion();
  if (a.version < 90000) {
    message = "version " + std::to_string(a.version) + " is below 9.0";
    return false;
  }
  return true;
}

Loaded &loaded() {
  static Loaded l;
  return l;
}

void load() {
  Loaded &l = loaded();
  std::string tried;
  auto attempt = [&](const std::string &what, void *lib) {
    if (!lib) {
      const char *e = ::dlerror();
      tried += "; " + what + ": " + (e ? e : "not loadable");
      return false;
    }
    std::string why;
    if (!bind(lib, l.api, why)) {
      tried += "; " + what + ": " + why;
      l.api = Api{};
      return false; // the library stays loaded (unloading cuDNN is not safe)
    }
    l.ok = true;
    l.message = what;
    return true;
  };
  if (const char *p = std::getenv("COIL_CUDNN_LIBRARY"); p && *p)
    if (attempt(p, openPath(p))) return;
  if (attempt(kSoname, ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL))) return;
  for (const std::string &dir : candidateDirs()) {
    std::string path = dir + "/" + kSoname;
    if (isFile(path) && attempt(path, openPath(path))) return;
  }
  l.message = "cuDNN 9 not found (tried " +
              (tried.size() > 2 ? tried.substr(2) : std::string("nothing")) +
              "; no nvidia/cudnn/lib in the Python package directories; COIL_CUDNN_LIBRARY names "
              "the library)";
}

} // namespace

const Api *api() {
  static std::once_flag once;
  std::call_once(once, load);
  return loaded().ok ? &loaded().api : nullptr;
}

const char *loadMessage() {
  (void)api();
  return loaded().message.c_str();
}

const char *statusText(const Api &a, Status s) {
  const char *t = a.getErrorString ? a.getErrorString(s) : nullptr;
  return t ? t : "unknown cuDNN status";
}

} // namespace coil::cuda::dnn
