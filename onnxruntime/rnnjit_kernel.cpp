// rnnjit's ONNX Runtime library: a node run on rnnjit, through its C API's ONNX operators
// (rnnjit_onnx_*: runtime/onnx_adapter.cpp). Weights that are constant initializers (nearly every
// model's) are imported once when the kernel is made, and packed once per shape; others are
// imported each run. Executions (a plan, its compiled kernels from rnnjit's process-wide cache, a
// workspace) are kept per (T, N): the last kMaxShapes used, within kMaxKeptBytes. A DynamicQuantizeLSTM node's int8 W and
// R are dequantized as they are imported (quantized_weights.cpp) and run on rnnjit's int8 plan.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "onnxruntime/kernel.hpp"

namespace rnnjit::ort {
namespace {

// Streaming models call with many T (chunks of 16-32 frames, the tail of an utterance): with
// fewer kept shapes than the T in rotation, every run would plan an execution and pack again.
// Their workspaces and distinct packed weights bound what is kept for large shapes.
constexpr std::size_t kMaxShapes = 64;
constexpr std::size_t kMaxKeptBytes = std::size_t{512} << 20;

struct RnnDeleter {
  void operator()(rnnjit_rnn_t* p) const { rnnjit_rnn_destroy(p); }
};
struct ExecutionDeleter {
  void operator()(rnnjit_execution_t* p) const { rnnjit_execution_destroy(p); }
};
using RnnHandle = std::unique_ptr<rnnjit_rnn_t, RnnDeleter>;
using ExecutionHandle = std::unique_ptr<rnnjit_execution_t, ExecutionDeleter>;

// rnnjit's status as the node's error: UNSUPPORTED becomes Unsupported (the caller decides),
// everything else an ONNX Runtime error naming the node.
void check_rnnjit(const RnnNode& node, rnnjit_status_t status) {
  if (status == RNNJIT_STATUS_OK) return;
  const std::string message = rnnjit_last_error();
  if (status == RNNJIT_STATUS_UNSUPPORTED) throw Unsupported(message);
  node.fail_here(message, status == RNNJIT_STATUS_INVALID_ARGUMENT ? ORT_INVALID_ARGUMENT : ORT_RUNTIME_EXCEPTION);
}

bool present(const OrtKernelInfo* info, std::size_t index, std::size_t count) {
  if (index >= count) return false;
  std::size_t size = 0;
  check(api().api->KernelInfo_GetInputName(info, index, nullptr, &size));
  return size > 1;  // counts the terminating NUL: an absent optional input's name is ""
}

// The session's "rnnjit.num_threads" config entry (SessionOptions.add_session_config_entry): the
// worker threads of this session's rnnjit networks, 0 where not set (RNNJIT_NUM_THREADS, else
// every hardware thread). Kernels read session config entries from C API 24 (ONNX Runtime 1.24).
std::int32_t session_threads(const OrtKernelInfo* info, const RnnNode& node) {
#if ORT_API_VERSION >= 24
  if (api().version < 24) return 0;
  const OrtApi& a = *api().api;
  OrtKeyValuePairs* entries = nullptr;
  check(a.KernelInfo_GetConfigEntries(info, &entries));
  const char* v = a.GetKeyValue(entries, "rnnjit.num_threads");
  const std::string text = v ? v : "";
  a.ReleaseKeyValuePairs(entries);
  if (text.empty()) return 0;
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > 256)
    node.fail_here("session config entry rnnjit.num_threads must be an integer in [1, 256], got \"" + text + "\"");
  return static_cast<std::int32_t>(n);
#else
  (void)info, (void)node;
  return 0;
#endif
}

// A constant initializer's value, or an empty view where the input is not constant.
TensorView constant_input(const OrtKernelInfo* info, std::size_t index) {
  int is_constant = 0;
  const OrtValue* value = nullptr;
  check(api().api->KernelInfoGetConstantInput_tensor(info, index, &is_constant, &value));
  return is_constant ? view(value) : TensorView{};
}

class RnnjitKernel final : public Kernel {
 public:
  RnnjitKernel(const OrtKernelInfo* info, RnnNode node, bool quantized)
      : node_(std::move(node)), quantized_(quantized) {
    if (node_.attrs.activations_unreadable)
      throw Unsupported("its activations cannot be read by this ONNX Runtime (C API " +
                        std::to_string(api().version) + "; string lists need 25, ONNX Runtime 1.25)");
    std::size_t inputs = 0;
    check(api().api->KernelInfo_GetInputCount(info, &inputs));
    has_B_ = present(info, kB, inputs);
    has_P_ = present(info, kP, inputs);
    // The weights: constant when W, R and whichever of B and P the node has are initializers.
    TensorView W = constant_input(info, kW), R = constant_input(info, kR);
    TensorView B = has_B_ ? constant_input(info, kB) : TensorView{};
    TensorView P = has_P_ ? constant_input(info, kP) : TensorView{};
    std::array<TensorView, 4> q{};  // DynamicQuantizeLSTM's scales and zero points
    if (quantized_)
      for (std::size_t i = 0; i < q.size(); ++i) {
        constexpr const char* kNames[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
        if (!present(info, kWScale + i, inputs)) node_.fail_here(std::string(kNames[i]) + " is a required input");
        q[i] = constant_input(info, kWScale + i);
      }
    const bool constant =
        W && R && (!has_B_ || B) && (!has_P_ || P) && (!quantized_ || (q[0] && q[1] && q[2] && q[3]));
    // The attributes, checked now (a model rnnjit cannot run fails at session creation, not at
    // its first run), for the input size of W where it is known.
    std::int64_t input_size = 1;
    const std::size_t input_dim = quantized_ ? 1 : 2;  // DynamicQuantizeLSTM's W is [D, I, 4H]
    if (W && W.dims.size() == 3 && W.dims[input_dim] > 0) input_size = W.dims[input_dim];
    threads_ = session_threads(info, node_);
    rnnjit_config_t config{};
    fill_c_attributes(node_.attrs, has_P_, c_attrs_);
    check_rnnjit(node_, rnnjit_onnx_config(&c_attrs_.attrs, input_size, &config));
    if (constant) import_weights(W, R, B, P, q);
    constant_ = constant;
    if (verbose())
      std::fprintf(stderr, "rnnjit: %s runs on rnnjit (weights %s)\n", node_.what.c_str(),
                   constant ? "constant: imported once, packed once a shape" : "inputs: imported each run");
  }

  void compute(OrtKernelContext* ctx) override {
    RunShape s;
    RunTensors t = bind_run(node_, ctx, s);
    std::lock_guard<std::mutex> lock(mutex_);  // ONNX Runtime may run one session from several threads
    if (!constant_) {
      import_weights(t.in[kW], t.in[kR], has_B_ ? t.in[kB] : TensorView{}, has_P_ ? t.in[kP] : TensorView{},
                     quantized_ ? quantized_inputs(ctx) : std::array<TensorView, 4>{});
    }
    if (s.I != input_size_)
      node_.fail_here("X's input size " + std::to_string(s.I) + " differs from W's " + std::to_string(input_size_));
    Shape& shape = execution_for(s.T, s.N);
    rnnjit_onnx_io_t io{};
    const TensorView &X = t.in[kX], &seq = t.in[kSequenceLens], &h0 = t.in[kInitialH], &c0 = t.in[kInitialC];
    io.X = X.floats(), io.X_size = static_cast<std::size_t>(X.elements);
    if (seq) io.sequence_lens = static_cast<const std::int32_t*>(seq.data), io.sequence_lens_size = seq.elements;
    if (h0) io.initial_h = h0.floats(), io.initial_h_size = static_cast<std::size_t>(h0.elements);
    if (c0) io.initial_c = c0.floats(), io.initial_c_size = static_cast<std::size_t>(c0.elements);
    float* outputs[3] = {};
    std::size_t sizes[3] = {};
    for (std::size_t o = 0; o < t.out.size(); ++o) {
      if (!t.out[o]) continue;
      void* data = nullptr;
      check(api().api->GetTensorMutableData(t.out[o], &data));
      outputs[o] = static_cast<float*>(data);
      sizes[o] = static_cast<std::size_t>(o == kY ? s.T * s.D * s.N * s.H : s.D * s.N * s.H);
    }
    io.Y = outputs[kY], io.Y_size = sizes[kY];
    io.Y_h = outputs[kYh], io.Y_h_size = sizes[kYh];
    io.Y_c = outputs[kYc], io.Y_c_size = sizes[kYc];
    if (shape.packed) io.packed_weights = shape.packed->data(), io.packed_weights_bytes = shape.packed->size();
    check_rnnjit(node_, rnnjit_onnx_forward(shape.ex.get(), &c_attrs_.attrs, weights_.data(), weights_.size(), &io));
    counters().rnnjit_runs.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  struct Shape {
    std::int64_t T = 0, N = 0;
    ExecutionHandle ex;
    // The constant weights packed for this execution's plan, shared with the other shapes'
    // executions whose plans pack them into the same bytes.
    std::shared_ptr<const std::vector<std::byte>> packed;
    std::size_t workspace_bytes = 0;
    std::uint64_t last_use = 0;
  };

  // DynamicQuantizeLSTM's scales and zero points of this run.
  static std::array<TensorView, 4> quantized_inputs(OrtKernelContext* ctx) {
    std::size_t inputs = 0;
    check(api().api->KernelContext_GetInputCount(ctx, &inputs));
    std::array<TensorView, 4> q{};
    for (std::size_t i = 0; i < q.size() && kWScale + i < inputs; ++i) {
      const OrtValue* v = nullptr;
      check(api().api->KernelContext_GetInput(ctx, kWScale + i, &v));
      q[i] = view(v);
    }
    return q;
  }

  // W, R, B and P (checked against the node; for DynamicQuantizeLSTM W and R dequantized with q's
  // scales and zero points first) into rnnjit's canonical weights; the network is made anew where
  // the input size changes (the executions with it).
  void import_weights(const TensorView& W_given, const TensorView& R_given, const TensorView& B, const TensorView& P,
                      const std::array<TensorView, 4>& q) {
    Dequantized dequantized;  // FP32 W and R: needed only until imported
    TensorView W = W_given, R = R_given;
    if (quantized_) {
      dequantize_weights(node_, W_given, R_given, q, dequantized);
      W = dequantized.W.view, R = dequantized.R.view;
    }
    node_.check_weights(W, R, B, P);
    const std::int64_t I = W.dims[2];
    if (!rnn_ || I != input_size_) {
      rnnjit_config_t config{};
      check_rnnjit(node_, rnnjit_onnx_config(&c_attrs_.attrs, I, &config));
      config.threads = threads_;
      if (quantized_) config.quantize = RNNJIT_QUANTIZE_INT8_DYNAMIC;
      rnnjit_rnn_t* rnn = nullptr;
      check_rnnjit(node_, rnnjit_rnn_create(&config, &rnn));
      rnn_.reset(rnn);
      shapes_.clear();
      input_size_ = I;
      std::size_t size = 0;
      check_rnnjit(node_, rnnjit_rnn_weights_size(rnn, &size));
      weights_.assign(size, 0.0f);
    }
    check_rnnjit(node_, rnnjit_onnx_import_weights(
                            &c_attrs_.attrs, I, W.floats(), static_cast<std::size_t>(W.elements), R.floats(),
                            static_cast<std::size_t>(R.elements), B ? B.floats() : nullptr,
                            B ? static_cast<std::size_t>(B.elements) : 0, P ? P.floats() : nullptr,
                            P ? static_cast<std::size_t>(P.elements) : 0, weights_.data(), weights_.size()));
  }

  // The execution of (T, N): kept, or made (planned and compiled through rnnjit's caches) and,
  // for constant weights, their packing done once; the least recently used ones are dropped
  // beyond kMaxShapes or kMaxKeptBytes.
  Shape& execution_for(std::int64_t T, std::int64_t N) {
    ++clock_;
    for (Shape& s : shapes_)
      if (s.T == T && s.N == N) {
        s.last_use = clock_;
        return s;
      }
    Shape s;
    s.T = T, s.N = N, s.last_use = clock_;
    rnnjit_execution_t* ex = nullptr;
    check_rnnjit(node_, rnnjit_execution_create(rnn_.get(), T, N, RNNJIT_MODE_INFERENCE, &ex));
    s.ex.reset(ex);
    check_rnnjit(node_, rnnjit_execution_workspace_size(ex, &s.workspace_bytes));
    const auto kept_bytes = [&] {
      std::size_t total = s.workspace_bytes;
      std::vector<const void*> packs;
      for (const Shape& other : shapes_) {
        total += other.workspace_bytes;
        if (other.packed && std::find(packs.begin(), packs.end(), other.packed.get()) == packs.end()) {
          packs.push_back(other.packed.get());
          total += other.packed->size();
        }
      }
      return total;
    };
    while (!shapes_.empty() && (shapes_.size() >= kMaxShapes || kept_bytes() > kMaxKeptBytes))
      shapes_.erase(std::min_element(shapes_.begin(), shapes_.end(),
                                     [](const Shape& a, const Shape& b) { return a.last_use < b.last_use; }));
    if (constant_) {
      std::size_t bytes = 0;
      check_rnnjit(node_, rnnjit_execution_packed_weights_size(ex, &bytes));
      if (bytes > 0) {
        auto packed = std::make_shared<std::vector<std::byte>>(bytes);
        check_rnnjit(node_, rnnjit_pack_weights(ex, weights_.data(), weights_.size(), packed->data(), bytes));
        counters().weight_packs.fetch_add(1, std::memory_order_relaxed);
        s.packed = std::move(packed);
        // Plans of many shapes (the T of streamed chunks) pack alike: one copy serves them all.
        for (const Shape& other : shapes_)
          if (other.packed && *other.packed == *s.packed) {
            s.packed = other.packed;
            break;
          }
      }
    }
    shapes_.push_back(std::move(s));
    return shapes_.back();
  }

  RnnNode node_;
  CAttributes c_attrs_;
  bool quantized_ = false;  // DynamicQuantizeLSTM: int8 W and R, run on rnnjit's int8 plan
  bool has_B_ = false, has_P_ = false, constant_ = false;
  std::int32_t threads_ = 0;  // rnnjit's worker threads (0: its default)
  std::mutex mutex_;
  RnnHandle rnn_;
  std::int64_t input_size_ = 0;
  std::vector<float> weights_;  // canonical layout
  std::vector<Shape> shapes_;
  std::uint64_t clock_ = 0;
};

}  // namespace

Counters& counters() {
  static Counters c;
  return c;
}

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("RNNJIT_VERBOSE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

std::unique_ptr<Kernel> make_rnnjit_kernel(const OrtKernelInfo* info, RnnNode node, bool quantized) {
  auto k = std::make_unique<RnnjitKernel>(info, std::move(node), quantized);
  counters().rnnjit_kernels.fetch_add(1, std::memory_order_relaxed);
  return k;
}

}  // namespace rnnjit::ort
