#include "runtime/cuda/cudnn_peer.hpp"

#include <cudnn.h>

#include <variant>
#include <vector>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "rnnjit/weights.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/dynlib.hpp"

namespace rnnjit::cuda {
namespace {

#define RNNJIT_STRINGIFY2(x) #x
#define RNNJIT_STRINGIFY(x) RNNJIT_STRINGIFY2(x)

#if CUDNN_MAJOR >= 9
#define RNNJIT_CUDNN_SET_CLIP cudnnRNNSetClip_v9
#else
#define RNNJIT_CUDNN_SET_CLIP cudnnRNNSetClip_v8
#endif

#define RNNJIT_CUDNN_FUNCTIONS(X)                                                                                      \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                           \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensorNdDescriptor)                         \
  X(cudnnGetTensorNdDescriptor) X(cudnnCreateDropoutDescriptor) X(cudnnDestroyDropoutDescriptor)                       \
  X(cudnnSetDropoutDescriptor) X(cudnnCreateRNNDescriptor) X(cudnnDestroyRNNDescriptor) X(cudnnSetRNNDescriptor_v8)    \
  X(RNNJIT_CUDNN_SET_CLIP) X(cudnnCreateRNNDataDescriptor) X(cudnnDestroyRNNDataDescriptor)                            \
  X(cudnnSetRNNDataDescriptor) X(cudnnGetRNNWeightSpaceSize) X(cudnnGetRNNTempSpaceSizes) X(cudnnGetRNNWeightParams)   \
  X(cudnnRNNForward) X(cudnnRNNBackwardData_v8) X(cudnnRNNBackwardWeights_v8)

struct CudnnApi {
#define RNNJIT_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  RNNJIT_CUDNN_FUNCTIONS(RNNJIT_DECLARE_ENTRY)
#undef RNNJIT_DECLARE_ENTRY
  std::string path;
};

std::string cudnn_soname() { return fmt::format("libcudnn.so.{}", CUDNN_MAJOR); }

std::variant<CudnnApi, std::string> load() {
  static auto* library = new DynamicLibrary(toolkit_candidates(cudnn_soname()));  // never unloaded
  if (!library->loaded()) return fmt::format("cuDNN not available: {} not found ({})", cudnn_soname(), library->error());
  CudnnApi api;
  api.path = library->path();
#define RNNJIT_RESOLVE_ENTRY(name)                                                                \
  api.name = reinterpret_cast<decltype(api.name)>(library->symbol(RNNJIT_STRINGIFY(name)));      \
  if (!api.name) return fmt::format("cuDNN not available: {} has no {}", api.path, RNNJIT_STRINGIFY(name));
  RNNJIT_CUDNN_FUNCTIONS(RNNJIT_RESOLVE_ENTRY)
#undef RNNJIT_RESOLVE_ENTRY
  return api;
}

const CudnnApi& cudnn() {
  static const std::variant<CudnnApi, std::string> loaded = load();
  if (const auto* why = std::get_if<std::string>(&loaded)) throw Error(*why);
  return std::get<CudnnApi>(loaded);
}

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(fmt::format("{}: {}", what, cudnn().cudnnGetErrorString(s)));
}

int to_int(std::int64_t v) { return static_cast<int>(v); }  // sizes passed validate()'s int limits

cudnnRNNMode_t cudnn_mode(CellKind cell) {
  if (cell == CellKind::rnn_relu) return CUDNN_RNN_RELU;
  if (cell == CellKind::rnn_tanh) return CUDNN_RNN_TANH;
  if (cell == CellKind::lstm) return CUDNN_LSTM;
  if (cell == CellKind::gru) return CUDNN_GRU;  // linear before reset, as rnnjit's gru
  throw Error(fmt::format("the cuDNN peer has no cell {} (cuDNN's cells are rnn_relu, rnn_tanh, lstm and gru)",
                          to_string(cell)));
}

}  // namespace

std::string cudnn_status(bool* ok) {
  try {
    const CudnnApi& api = cudnn();
    if (ok) *ok = true;
    return fmt::format("{} (version {})", api.path, api.cudnnGetVersion());
  } catch (const std::exception& e) {
    if (ok) *ok = false;
    return e.what();
  }
}

struct CudnnRnn::Impl {
  RnnConfig config;
  Shape shape;
  Mode mode;
  const CudnnApi& api = cudnn();
  Stream stream;
  cudnnHandle_t handle = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnTensorDescriptor_t h_desc = nullptr, c_desc = nullptr, m_desc = nullptr, b_desc = nullptr;
  std::size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  DeviceBuffer weights, dweights, work, reserve, lengths;

  Impl(const RnnConfig& c, const Shape& s, Mode m, CudnnAlgo algo) : config(c), shape(s), mode(m) {
    ContextScope scope;
    check(api.cudnnCreate(&handle), "cudnnCreate");
    check(api.cudnnSetStream(handle, stream.get()), "cudnnSetStream");
    check(api.cudnnCreateDropoutDescriptor(&dropout), "cudnnCreateDropoutDescriptor");
    // No dropout: no random state is needed (PyTorch sets its no-dropout descriptor the same way).
    check(api.cudnnSetDropoutDescriptor(dropout, handle, 0.0f, nullptr, 0, 0), "cudnnSetDropoutDescriptor");
    check(api.cudnnCreateRNNDescriptor(&rnn), "cudnnCreateRNNDescriptor");
    const std::int64_t S = c.state_size(), D = c.directions();
    const cudnnRNNAlgo_t cudnn_algo =
        algo == CudnnAlgo::persistent_static ? CUDNN_RNN_ALGO_PERSIST_STATIC : CUDNN_RNN_ALGO_STANDARD;
    check(api.cudnnSetRNNDescriptor_v8(rnn, cudnn_algo, cudnn_mode(c.cell),
                                       CUDNN_RNN_DOUBLE_BIAS, c.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                       CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH,
                                       to_int(c.input_size), to_int(c.hidden_size), to_int(S), to_int(c.num_layers),
                                       dropout, CUDNN_RNN_PADDED_IO_ENABLED),
          "cudnnSetRNNDescriptor_v8");
    if (c.clip > 0.0f) {
#if CUDNN_MAJOR >= 9
      check(api.RNNJIT_CUDNN_SET_CLIP(rnn, CUDNN_RNN_CLIP_MINMAX, -c.clip, c.clip), "cudnnRNNSetClip");
#else
      check(api.RNNJIT_CUDNN_SET_CLIP(rnn, CUDNN_RNN_CLIP_MINMAX, CUDNN_PROPAGATE_NAN, -c.clip, c.clip), "cudnnRNNSetClip");
#endif
    }
    const cudnnRNNDataLayout_t layout =
        c.batch_first ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    const std::vector<int> seq(static_cast<std::size_t>(s.batch), to_int(s.seq_len));
    check(api.cudnnCreateRNNDataDescriptor(&x_desc), "cudnnCreateRNNDataDescriptor");
    check(api.cudnnCreateRNNDataDescriptor(&y_desc), "cudnnCreateRNNDataDescriptor");
    check(api.cudnnSetRNNDataDescriptor(x_desc, CUDNN_DATA_FLOAT, layout, to_int(s.seq_len), to_int(s.batch),
                                        to_int(c.input_size), seq.data(), nullptr),
          "cudnnSetRNNDataDescriptor x");
    check(api.cudnnSetRNNDataDescriptor(y_desc, CUDNN_DATA_FLOAT, layout, to_int(s.seq_len), to_int(s.batch),
                                        to_int(D * S), seq.data(), nullptr),
          "cudnnSetRNNDataDescriptor y");
    for (auto* t : {&h_desc, &c_desc, &m_desc, &b_desc})
      check(api.cudnnCreateTensorDescriptor(t), "cudnnCreateTensorDescriptor");
    set_3d(h_desc, c.num_layers * D, s.batch, S);
    set_3d(c_desc, c.num_layers * D, s.batch, c.hidden_size);
    check(api.cudnnGetRNNWeightSpaceSize(handle, rnn, &weight_bytes), "cudnnGetRNNWeightSpaceSize");
    check(api.cudnnGetRNNTempSpaceSizes(handle, rnn, training() ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                        x_desc, &work_bytes, &reserve_bytes),
          "cudnnGetRNNTempSpaceSizes");
    std::uint64_t allocations = 0;
    weights.reserve(weight_bytes, allocations);
    if (training()) dweights.reserve(weight_bytes, allocations);
    work.reserve(work_bytes, allocations);
    reserve.reserve(reserve_bytes, allocations);
    // Every element runs all T steps; cuDNN reads the lengths from device memory too.
    lengths.reserve(seq.size() * sizeof(int), allocations);
    copy_to_device(lengths.data(), seq.data(), seq.size() * sizeof(int));
  }

  ~Impl() {
    try {
      ContextScope scope;
      stream.synchronize();
      for (auto t : {h_desc, c_desc, m_desc, b_desc})
        if (t) api.cudnnDestroyTensorDescriptor(t);
      for (auto d : {x_desc, y_desc})
        if (d) api.cudnnDestroyRNNDataDescriptor(d);
      if (rnn) api.cudnnDestroyRNNDescriptor(rnn);
      if (dropout) api.cudnnDestroyDropoutDescriptor(dropout);
      if (handle) api.cudnnDestroy(handle);
    } catch (...) {  // only when the driver has gone away
    }
  }

  bool training() const { return mode == Mode::training; }

  void set_3d(cudnnTensorDescriptor_t t, std::int64_t a, std::int64_t b, std::int64_t c) {
    const int dims[3] = {to_int(a), to_int(b), to_int(c)}, strides[3] = {to_int(b * c), to_int(c), 1};
    check(api.cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 3, dims, strides), "cudnnSetTensorNdDescriptor");
  }

  static std::int64_t elements(const CudnnApi& api, cudnnTensorDescriptor_t t) {
    cudnnDataType_t type{};
    int dims = 0, dim[8] = {}, stride[8] = {};
    check(api.cudnnGetTensorNdDescriptor(t, 8, &type, &dims, dim, stride), "cudnnGetTensorNdDescriptor");
    std::int64_t n = 1;
    for (int i = 0; i < dims; ++i) n *= dim[i];
    return n;
  }

  // Copies every canonical block between `canonical` and cuDNN's weight space `space`, matrix
  // by matrix and bias by bias, in the direction `into_space`. cuDNN's linear layers of a
  // pseudo-layer (layer * D + direction) are: input-side gates 0..G-1 (LSTM i,f,g,o; GRU r,z,n),
  // then recurrent-side gates G..2G-1, then (LSTM with projection) the projection, 2G. Each
  // matrix is [H, I_l] (or [H, S], [P, H]) row-major, which is that gate's rows of PyTorch's.
  void copy_weights(float* canonical, std::byte* space, bool into_space) {
    const WeightLayout layout(config);
    const std::int64_t G = config.gates(), H = config.hidden_size, D = config.directions();
    const DriverApi& d = driver();
    auto copy = [&](void* cudnn_addr, std::int64_t offset, std::int64_t count, std::int64_t cudnn_count, const char* what) {
      if (!cudnn_addr || cudnn_count != count)
        throw Error(fmt::format("cuDNN's weight space does not hold {} as expected ({} elements, cuDNN says {})", what,
                                count, cudnn_addr ? cudnn_count : 0));
      const CUdeviceptr ours = device_ptr(canonical + offset), theirs = device_ptr(cudnn_addr);
      check(d.cuMemcpyDtoDAsync(into_space ? theirs : ours, into_space ? ours : theirs, count * sizeof(float),
                                stream.get()),
            "cuMemcpyDtoDAsync");
    };
    for (std::int64_t l = 0; l < config.num_layers; ++l)
      for (int dir = 0; dir < D; ++dir) {
        const std::int64_t pseudo = l * D + dir;
        const int linear_layers = static_cast<int>(2 * G) + (config.proj_size > 0 ? 1 : 0);
        for (int id = 0; id < linear_layers; ++id) {
          void* m = nullptr;
          void* b = nullptr;
          check(api.cudnnGetRNNWeightParams(handle, rnn, to_int(pseudo), weight_bytes, space, id, m_desc, &m, b_desc, &b),
                "cudnnGetRNNWeightParams");
          if (id == 2 * G) {  // the projection: no bias
            const ParamBlock& w = layout.block(l, dir, ParamKind::weight_hr);
            copy(m, w.offset, w.size, elements(api, m_desc), w.name.c_str());
            continue;
          }
          const bool input = id < G;
          const std::int64_t g = input ? id : id - G;
          const ParamBlock& w = layout.block(l, dir, input ? ParamKind::weight_ih : ParamKind::weight_hh);
          const ParamBlock& bias = layout.block(l, dir, input ? ParamKind::bias_ih : ParamKind::bias_hh);
          const std::int64_t cols = w.size / (G * H);
          copy(m, w.offset + g * H * cols, H * cols, elements(api, m_desc), w.name.c_str());
          copy(b, bias.offset + g * H, H, elements(api, b_desc), bias.name.c_str());
        }
      }
    stream.synchronize();
  }
};

CudnnRnn::CudnnRnn(const RnnConfig& config, const Shape& shape, Mode mode, CudnnAlgo algo) {
  validate(config, shape);
  Device::instance();  // "no CUDA device: ..." first
  cudnn();             // then "cuDNN not available: ..."
  if (const std::string why = cudnn_peer_refusal(config, mode); !why.empty()) throw Error(why);
  cudnn_mode(config.cell);  // every cell the refusal lets through has a cuDNN mode
  impl_ = std::make_unique<Impl>(config, shape, mode, algo);
}

CudnnRnn::~CudnnRnn() = default;

void CudnnRnn::set_weights(const float* weights) {
  ContextScope scope;
  impl_->copy_weights(const_cast<float*>(weights), impl_->weights.data(), true);
}

void CudnnRnn::forward(const CudnnForwardIo& io) {
  Impl& m = *impl_;
  ContextScope scope;
  check(m.api.cudnnRNNForward(m.handle, m.rnn, m.training() ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                              reinterpret_cast<const std::int32_t*>(m.lengths.data()), m.x_desc, io.x, m.y_desc, io.y,
                              m.h_desc, io.hx, io.hy, m.c_desc, io.cx, io.cy, m.weight_bytes, m.weights.data(),
                              m.work_bytes, m.work.data(), m.reserve_bytes, m.reserve.data()),
        "cudnnRNNForward");
  m.stream.synchronize();
}

void CudnnRnn::backward(const CudnnBackwardIo& io) {
  Impl& m = *impl_;
  if (!m.training()) throw Error("the cuDNN peer's backward needs a peer made for training");
  ContextScope scope;
  const auto* lengths = reinterpret_cast<const std::int32_t*>(m.lengths.data());
  check(m.api.cudnnRNNBackwardData_v8(m.handle, m.rnn, lengths, m.y_desc, io.y, io.dy, m.x_desc, io.dx, m.h_desc, io.hx,
                                      io.dhy, io.dhx, m.c_desc, io.cx, io.dcy, io.dcx, m.weight_bytes, m.weights.data(),
                                      m.work_bytes, m.work.data(), m.reserve_bytes, m.reserve.data()),
        "cudnnRNNBackwardData_v8");
  if (io.dweights) {
    // cuDNN adds into the gradient space (CUDNN_WGRAD_MODE_ADD is the mode it supports): zero it first.
    check(driver().cuMemsetD8Async(device_ptr(m.dweights.data()), 0, m.weight_bytes, m.stream.get()), "cuMemsetD8Async");
    check(m.api.cudnnRNNBackwardWeights_v8(m.handle, m.rnn, CUDNN_WGRAD_MODE_ADD, lengths, m.x_desc, io.x, m.h_desc,
                                           io.hx, m.y_desc, io.y, m.weight_bytes, m.dweights.data(), m.work_bytes,
                                           m.work.data(), m.reserve_bytes, m.reserve.data()),
          "cudnnRNNBackwardWeights_v8");
    m.copy_weights(io.dweights, m.dweights.data(), false);  // synchronizes the stream
  }
  m.stream.synchronize();
}

}  // namespace rnnjit::cuda
