// rnnjit: cuDNN's RNN on the same configuration and canonical weights as an Execution with
// Device::cuda: the peer that the CUDA tests compare against and the benchmark times
// (`rnn-jit bench --device cuda --compare cudnn`). It uses cuDNN's v8 RNN API
// (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8) in FP32 (FMA math, no
// tensor cores); the canonical weights are copied into cuDNN's weight space block by block
// through cudnnGetRNNWeightParams, and the weight gradients back out the same way.
// libcudnn.so.<major> is loaded at run time (dlopen); builds without cudnn.h have no peer.
//
// Supported: every cell but the reset-before GRU, layers, bidirectional, LSTM projection and cell
// clip, batch-first. Refused with an Error (cudnn_peer_refusal): the reset-before GRU (ONNX's
// default GRU; cuDNN's is linear-before-reset only), the reverse-only direction (cuDNN has none),
// dropout in training (cuDNN draws its own masks, so results could not agree), ONNX's gate clip,
// LSTM peepholes and coupled input/forget gates (cuDNN has none of them), networks without
// biases (not wired to CUDNN_RNN_NO_BIAS), and variable lengths (rnnjit's CUDA executor has none).
// Every pointer is a device address; h/c pointers may be null (zeros in, not written out).
// The algorithm is cuDNN's standard one (a GEMM and elementwise kernels per step, as rnnjit's
// executor) or, with CudnnAlgo::persistent_static, its persistent kernels, which keep the
// recurrent weights on chip across steps (for small batches; cuDNN refuses the shapes and
// devices it has no such kernel for, CUDNN_STATUS_NOT_SUPPORTED).
#pragma once

#include <memory>
#include <string>

#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::cuda {

struct CudnnForwardIo {
  const float* x = nullptr;
  const float* hx = nullptr;
  const float* cx = nullptr;
  float* y = nullptr;
  float* hy = nullptr;
  float* cy = nullptr;
};

struct CudnnBackwardIo {
  const float* x = nullptr;   // the forward's x, hx, cx and y
  const float* hx = nullptr;
  const float* cx = nullptr;
  const float* y = nullptr;
  const float* dy = nullptr;
  const float* dhy = nullptr;
  const float* dcy = nullptr;
  float* dx = nullptr;
  float* dhx = nullptr;
  float* dcx = nullptr;
  float* dweights = nullptr;  // canonical layout; overwritten (null: backward data only)
};

// Why the peer cannot run `config` in `mode`, in one line; empty when it can. Needs no GPU.
inline std::string cudnn_peer_refusal(const RnnConfig& config, Mode mode) {
  if (config.cell == CellKind::gru_reset_before)
    return "the cuDNN peer has no gru_reset_before (cuDNN's GRU is the linear-before-reset form only)";
  if (config.cell == CellKind::rnn_sigmoid)
    return "the cuDNN peer has no rnn_sigmoid (cuDNN's vanilla RNN is ReLU or tanh)";
  if (config.relu_alpha > 0.0f) return "the cuDNN peer has no relu_alpha (cuDNN's ReLU is not leaky)";
  if (config.reverse) return "the cuDNN peer has no reverse-only direction (cuDNN runs forward or bidirectional)";
  if (config.dropout > 0.0f && mode == Mode::training && config.num_layers > 1)
    return "the cuDNN peer runs without dropout (cuDNN draws its own masks; results could not agree)";
  if (config.gate_clip > 0.0f)
    return "the cuDNN peer has no gate_clip (cuDNN clips only the LSTM cell state, not every gate's pre-activation)";
  if (config.peephole) return "the cuDNN peer has no peephole (cuDNN's LSTM has no peephole connections)";
  if (config.input_forget) return "the cuDNN peer has no input_forget (cuDNN's LSTM has no coupled input and forget gates)";
  if (!config.bias) return "the cuDNN peer runs networks with biases only (bias=false is not wired to CUDNN_RNN_NO_BIAS)";
  if (config.sum_directions)
    return "the cuDNN peer has no sum_directions (cuDNN concatenates the two directions' outputs)";
  if (config.independent_stacks && config.num_layers > 1)
    return "the cuDNN peer has no independent_stacks (cuDNN's layers read both directions of the one below)";
  return {};
}

enum class CudnnAlgo { standard, persistent_static };

class CudnnRnn {
 public:
  // Throws Error: "no CUDA device: ...", "cuDNN not available: ...", or what is refused
  // (cudnn_peer_refusal, or cuDNN's own error for the algorithm).
  CudnnRnn(const RnnConfig& config, const Shape& shape, Mode mode, CudnnAlgo algo = CudnnAlgo::standard);
  ~CudnnRnn();
  CudnnRnn(const CudnnRnn&) = delete;
  CudnnRnn& operator=(const CudnnRnn&) = delete;

  // Copies canonical weights (device memory, WeightLayout order) into cuDNN's weight space.
  void set_weights(const float* weights);
  void forward(const CudnnForwardIo& io);
  // After a training forward: backward data, then (with io.dweights) backward weights.
  void backward(const CudnnBackwardIo& io);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rnnjit::cuda
