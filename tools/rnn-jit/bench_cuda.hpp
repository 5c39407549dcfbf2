// rnn-jit bench --device cuda: the contenders that run on the GPU. Each uploads the benchmark's
// data to device memory once and returns an iteration (forward; training adds backward data
// and weights) that returns when the device has finished it, so wall-clock timing is fair.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "rnnjit/rnn.hpp"
#include "runtime/cuda/cudnn_peer.hpp"

namespace rnnjit::cli {

struct HostData {
  std::span<const float> w, x, dy;
  std::span<const std::int32_t> lengths;  // --mixed-lengths (host memory, as the CUDA executor takes it); empty: all T
};

// rnnjit's CUDA Execution (Options::device = cuda).
std::function<void()> cuda_rnnjit_iteration(const RnnConfig& config, const Shape& shape, Mode mode, HostData data);
// cuDNN's RNN on the same weights with algorithm `algo` (runtime/cuda/cudnn_peer.hpp).
std::function<void()> cudnn_iteration(const RnnConfig& config, const Shape& shape, Mode mode, HostData data,
                                      cuda::CudnnAlgo algo);

}  // namespace rnnjit::cli
