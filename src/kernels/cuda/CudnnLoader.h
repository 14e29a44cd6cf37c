/// \file cuDNN 9 loaded at run time (dlopen), so that libcoil_cuda neither links nor needs it.
///
/// The library is looked up once per process, in this order: the path in the environment
/// variable COIL_CUDNN_LIBRARY; "libcudnn.so.9" through the default loader search
/// (LD_LIBRARY_PATH, ldconfig); then the `nvidia/cudnn/lib` (and `nvidia/cu13/lib`,
/// `nvidia/cu12/lib`) directories of Python package trees: $VIRTUAL_ENV, $CONDA_PREFIX,
/// PYTHONPATH entries, ~/.local, /usr/local and /usr (site-packages and dist-packages of every
/// python3* there), where pip's nvidia-cudnn wheels (e.g. PyTorch's) put it. A library found by
/// path loads its sibling sub-libraries (libcudnn_cnn.so.9, ...) through its RUNPATH ($ORIGIN);
/// libcudnn_cnn.so.9 of the same directory is also loaded first, so that a copy elsewhere on the
/// search path cannot shadow it. A library whose cudnnGetVersion() is below 9.0 is rejected.
///
/// Only the handful of legacy-API functions the convolution externs use are resolved. The
/// types and enum values are declared here (the cuDNN headers are not needed to build); where
/// the headers exist, CudnnLoader.cpp checks these declarations against them. The functions of
/// the fused convolution with bias and activation are optional: a library without them still
/// loads, and Api::hasFusedBias() is false.
#pragma once

#include <cstddef>

namespace coil::cuda::dnn {

using Status = int; ///< cudnnStatus_t
using Handle = void *;
using TensorDesc = void *;
using FilterDesc = void *;
using ConvDesc = void *;
using ActivationDesc = void *;

constexpr Status kSuccess = 0;
/// cudnnDataType_t
constexpr int kDataFloat = 0, kDataDouble = 1, kDataHalf = 2, kDataBfloat16 = 9;
/// cudnnMathType_t
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kTensorOpMathAllowConversion = 2, kFmaMath = 3;
/// cudnnTensorFormat_t
constexpr int kTensorNchw = 0, kTensorNhwc = 1;
/// cudnnConvolutionMode_t
constexpr int kCrossCorrelation = 1;
/// cudnnConvolutionFwdAlgo_t: the algorithm that cudnnConvolutionBiasActivationForward runs as
/// one fused kernel (the only one it allows with the identity activation).
constexpr int kFwdAlgoImplicitPrecompGemm = 1;
/// cudnnActivationMode_t, cudnnNanPropagation_t
constexpr int kActivationRelu = 1, kActivationIdentity = 5;
constexpr int kPropagateNan = 1;

/// cudnnConvolutionFwdAlgoPerf_t and cudnnConvolutionBwdDataAlgoPerf_t (same layout).
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};

/// The resolved functions of a loaded cuDNN (every pointer non-null).
struct Api {
  size_t version = 0; ///< cudnnGetVersion(), e.g. 91900 for 9.19.0
  const char *(*getErrorString)(Status) = nullptr;
  Status (*create)(Handle *) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*setStream)(Handle, void *) = nullptr;
  Status (*createTensorDescriptor)(TensorDesc *) = nullptr;
  Status (*setTensorNdDescriptor)(TensorDesc, int, int, const int *, const int *) = nullptr;
  Status (*destroyTensorDescriptor)(TensorDesc) = nullptr;
  Status (*createFilterDescriptor)(FilterDesc *) = nullptr;
  Status (*setFilterNdDescriptor)(FilterDesc, int, int, int, const int *) = nullptr;
  Status (*destroyFilterDescriptor)(FilterDesc) = nullptr;
  Status (*createConvolutionDescriptor)(ConvDesc *) = nullptr;
  Status (*setConvolutionNdDescriptor)(ConvDesc, int, const int *, const int *, const int *, int,
                                       int) = nullptr;
  Status (*setConvolutionGroupCount)(ConvDesc, int) = nullptr;
  Status (*setConvolutionMathType)(ConvDesc, int) = nullptr;
  Status (*destroyConvolutionDescriptor)(ConvDesc) = nullptr;
  Status (*getConvolutionNdForwardOutputDim)(ConvDesc, TensorDesc, FilterDesc, int,
                                             int *) = nullptr;
  Status (*getConvolutionForwardAlgorithmV7)(Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc,
                                             int, int *, AlgoPerf *) = nullptr;
  Status (*getConvolutionForwardWorkspaceSize)(Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc,
                                               int, size_t *) = nullptr;
  Status (*convolutionForward)(Handle, const void *, TensorDesc, const void *, FilterDesc,
                               const void *, ConvDesc, int, void *, size_t, const void *,
                               TensorDesc, void *) = nullptr;
  Status (*getConvolutionBackwardDataAlgorithmV7)(Handle, FilterDesc, TensorDesc, ConvDesc,
                                                  TensorDesc, int, int *, AlgoPerf *) = nullptr;
  Status (*getConvolutionBackwardDataWorkspaceSize)(Handle, FilterDesc, TensorDesc, ConvDesc,
                                                    TensorDesc, int, size_t *) = nullptr;
  Status (*convolutionBackwardData)(Handle, const void *, FilterDesc, const void *, TensorDesc,
                                    const void *, ConvDesc, int, void *, size_t, const void *,
                                    TensorDesc, void *) = nullptr;
  // Optional (null when the library lacks them): y = act(alpha1 * conv(x) + alpha2 * z + bias).
  Status (*createActivationDescriptor)(ActivationDesc *) = nullptr;
  Status (*setActivationDescriptor)(ActivationDesc, int, int, double) = nullptr;
  Status (*destroyActivationDescriptor)(ActivationDesc) = nullptr;
  Status (*convolutionBiasActivationForward)(Handle, const void *, TensorDesc, const void *,
                                             FilterDesc, const void *, ConvDesc, int, void *,
                                             size_t, const void *, TensorDesc, const void *,
                                             TensorDesc, const void *, ActivationDesc, TensorDesc,
                                             void *) = nullptr;
  bool hasFusedBias() const {
    return createActivationDescriptor && setActivationDescriptor && destroyActivationDescriptor &&
           convolutionBiasActivationForward;
  }
};

/// The process's cuDNN, loaded on the first call (thread-safe); nullptr when none was found or
/// it is unusable (loadMessage() says why).
const Api *api();
/// The path cuDNN was loaded from, or why it was not (loading it if not yet done).
const char *loadMessage();

/// The message of a cuDNN status (its name when the library provides none).
const char *statusText(const Api &a, Status s);

} // namespace coil::cuda::dnn
