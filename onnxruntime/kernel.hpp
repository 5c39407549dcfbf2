// rnnjit's ONNX Runtime library: the kernels behind a node. RnnjitKernel runs it on rnnjit;
// BuiltinKernel hands it to ONNX Runtime's own CPU kernel (the default domain's and
// com.microsoft's nodes that rnnjit cannot run). The op table (custom_ops.cpp) makes one per node at session creation.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "onnxruntime/rnn_node.hpp"

namespace rnnjit::ort {

// What the library did, for the tests (a silent fallback must fail them) and for users:
// rnnjit_onnxruntime_stats() in custom_ops.cpp.
struct Counters {
  std::atomic<std::uint64_t> rnnjit_kernels{0}, builtin_kernels{0}, rnnjit_runs{0}, builtin_runs{0}, weight_packs{0};
};
Counters& counters();

// A valid node that rnnjit does not run (alpha/beta entries no activation reads, ...): the default
// domain and com.microsoft hand it to ONNX Runtime's kernel, com.rnnjit reports it.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(OrtKernelContext* ctx) = 0;
};

bool verbose();  // RNNJIT_VERBOSE set (not "0"): the library says what it decides, on stderr

// quantized: the node is com.microsoft:DynamicQuantizeLSTM (its W and R dequantized as below, run
// on rnnjit's int8 plan: Quantize::int8_dynamic).
std::unique_ptr<Kernel> make_rnnjit_kernel(const OrtKernelInfo* info, RnnNode node, bool quantized = false);
// quantized: the node is com.microsoft:DynamicQuantizeLSTM (ONNX Runtime's contrib kernel runs it).
std::unique_ptr<Kernel> make_builtin_kernel(const OrtKernelInfo* info, RnnNode node, bool quantized = false);

// com.microsoft:DynamicQuantizeLSTM (quantized_weights.cpp): LSTM's eight inputs, then W_scale,
// W_zero_point, R_scale and R_zero_point. Its W [D, I, 4H] and R [D, H, 4H] (int8 or uint8) are
// checked against the node and their scales and zero points (per direction [D] or per gate row
// [D, 4H]) and dequantized to ONNX LSTM's FP32 W [D, 4H, I] and R [D, 4H, H].
enum QuantizedInput : std::size_t { kWScale = 8, kWZeroPoint, kRScale, kRZeroPoint, kQuantizedInputs };
struct Dequantized {
  struct Weight {
    std::vector<float> values;
    TensorView view;  // of values, shaped as ONNX LSTM's
  } W, R;
};
void dequantize_weights(const RnnNode& node, const TensorView& W, const TensorView& R,
                        const std::array<TensorView, 4>& scales_and_zero_points, Dequantized& out);

}  // namespace rnnjit::ort
