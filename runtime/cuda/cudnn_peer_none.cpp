// rnnjit: the cuDNN peer in builds without cudnn.h (or without the CUDA toolkit).
#include "rnnjit/error.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/cudnn_peer.hpp"

namespace rnnjit::cuda {
namespace {
constexpr const char* kNoCudnn = "cuDNN not available: rnnjit was built without cudnn.h";
}  // namespace

std::string cudnn_status(bool* ok) {
  if (ok) *ok = false;
  return kNoCudnn;
}

struct CudnnRnn::Impl {};
CudnnRnn::CudnnRnn(const RnnConfig&, const Shape&, Mode, CudnnAlgo) { throw Error(kNoCudnn); }
CudnnRnn::~CudnnRnn() = default;
void CudnnRnn::set_weights(const float*) { throw Error(kNoCudnn); }
void CudnnRnn::forward(const CudnnForwardIo&) { throw Error(kNoCudnn); }
void CudnnRnn::backward(const CudnnBackwardIo&) { throw Error(kNoCudnn); }

}  // namespace rnnjit::cuda
