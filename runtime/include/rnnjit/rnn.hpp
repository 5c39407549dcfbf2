// rnnjit: the public runtime API, shaped like cuDNN's RNN API.
//
//   rnnjit::Rnn rnn(config);                                   // the network: cell, sizes, layers, direction
//   rnnjit::Execution ex = rnn.prepare({T, N}, Mode::training); // plan + JIT compile, through the cache
//   ex.forward(weights, {.x = x, .y = y, .hy = hy, .cy = cy});   // training: keeps the reserve
//   ex.backward_data(weights, {.dy = dy, .dx = dx});            // reuses the reserve, no recomputation
//   ex.backward_weights({.x = x, .dweights = dw});
//
// Buffers are caller-owned float spans whose sizes are checked against the shape; optional
// ones are left empty (h0/c0: zeros; hy/cy/dh0/dc0: not written; dhy/dcy: zeros).
// An Execution owns a workspace and (training) a reserve that it allocates once and reuses
// on every call; callers may pass their own instead, sized by workspace_size()/reserve_size().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "rnnjit/config.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit {

enum class Mode : std::uint8_t { inference = 0, training = 1 };
enum class Backend : std::uint8_t { automatic = 0, reference = 1, jit = 2 };
// Instruction set for generated code. `detect` reads RNNJIT_ISA (avx512|avx2|reference) and
// otherwise picks the best the CPU runs. `cuda` names CUDA source compiled by NVRTC (kernel
// descriptors and `rnn-jit dump --target cuda`); it is never detected.
enum class Isa : std::uint8_t { reference = 0, avx2 = 1, avx512 = 2, cuda = 3, detect = 255 };

std::string_view to_string(Mode mode);
std::string_view to_string(Backend backend);
std::string_view to_string(Isa isa);
Mode parse_mode(std::string_view name);        // "infer"|"inference"|"train"|"training"
Backend parse_backend(std::string_view name);  // "auto"|"reference"|"jit"
Isa parse_isa(std::string_view name);          // "avx512"|"avx2"|"reference"
Isa detect_isa();                              // RNNJIT_ISA if set (validated), else the CPU's best
Isa cpu_isa();                                 // the best this CPU runs (RNNJIT_ISA not read)

// Where an Execution runs. With Device::cuda (builds that found the CUDA toolkit, on a machine
// with an NVIDIA GPU and driver) every span passed to forward/backward_data/backward_weights -
// weights, x, y, states, gradients, caller-provided workspace and reserve - holds DEVICE
// addresses (cuMemAlloc/cudaMalloc memory), as in cuDNN, except ForwardIo::seq_lengths, which
// is a HOST array (as cuDNN's seqLengthArray; forward uploads it); the Execution's own workspace and
// reserve are device memory it allocates once. Only their sizes are checked, never their
// contents. Each call returns when its results are in device memory (it synchronises its own
// streams, which are ordered after the legacy default stream's earlier work). GEMMs run on
// cuBLAS (FP32, no TF32) and the gate kernels are generated CUDA compiled by NVRTC for the
// device (cached in memory and under RNNJIT_CACHE_DIR). Not supported on the CUDA executor yet
// (Error "... is not supported on the CUDA executor yet"): batches over 65535. packed_weights_size() is 0 and Isa/threads do not apply. Without a usable device,
// Rnn::prepare throws Error("no CUDA device: <reason>").
enum class Device : std::uint8_t { cpu = 0, cuda = 1 };
std::string_view to_string(Device device);
Device parse_device(std::string_view name);  // "cpu"|"cuda"

// Who computes the input projections (per layer and direction, one GEMM over all T steps) of
// an AVX-512 plan; the recurrent and backward GEMMs are always generated there.
//   generated (default): rnnjit's own GEMM; deterministic at any thread count.
//   openblas: OpenBLAS's sgemm, W_ih read in place (nothing packed for it).
//   measured: whichever of the two ran the shape faster when first planned, timed once per
//     GEMM shape and thread count in a process (`rnn-jit plan` shows both times). The choice
//     follows the machine's load at that moment, so two processes may pick differently and
//     differ in the last bits of their results.
enum class ProjectionGemm : std::uint8_t { generated = 0, openblas = 1, measured = 2 };
std::string_view to_string(ProjectionGemm gemm);
ProjectionGemm parse_projection_gemm(std::string_view name);  // "generated"|"openblas"|"measured"

// What the GEMMs may round their inputs to (oneDNN's fpmath_mode, cuDNN's
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, PyTorch's float32_matmul_precision).
//   strict (default): FP32 products and sums throughout.
//   bf16: forward GEMMs whose B is the packed weights (the input projections, the recurrent
//     and LSTM projection GEMMs, in inference and in training's forward pass) may read bf16
//     copies of their operands (weights packed as bf16, x and h rounded to nearest even as each
//     GEMM reads them) and run on AMX-BF16 tiles or, where the CPU has no usable AMX, on
//     AVX512_BF16's dot products (Bf16Unit), summing in FP32. Everything else (gate math,
//     states, outputs, backward data and backward weights on the FP32 weights) stays FP32. A
//     permission, not a demand: plans for CPUs with neither (bf16_unit()) or another isa stay
//     FP32, and say so in their notes. Results then differ from strict by bf16's rounding
//     (about 3 significant digits per product's inputs), and subnormal GEMM inputs count as
//     zero (tdpbf16ps and vdpbf16ps flush them).
enum class FpMath : std::uint8_t { strict = 0, bf16 = 1 };
std::string_view to_string(FpMath math);
FpMath parse_fpmath(std::string_view name);  // "strict"|"bf16"
// Whether this CPU runs AMX-BF16 tiles and the OS lets this process use them (Linux asks for
// the tile data state once, with arch_prctl); false elsewhere.
bool amx_bf16_usable();
// Whether this CPU has AVX512_BF16 (vdpbf16ps) beside AVX-512 F, DQ, BW and VL.
bool avx512_bf16_usable();
// What runs the bf16 GEMMs of FpMath::bf16: AMX-BF16 tiles, or AVX512_BF16's vdpbf16ps on zmm
// registers (the same packed weights and rounding; AMD's Zen 4 and Zen 5 have only this).
enum class Bf16Unit : std::uint8_t { amx = 0, avx512_bf16 = 1 };
std::string_view to_string(Bf16Unit unit);
Bf16Unit parse_bf16_unit(std::string_view name);  // "amx"|"avx512_bf16"
// The unit this process runs bf16 GEMMs on: RNNJIT_BF16_UNIT where set (an Error if this CPU
// cannot run it), else AMX where usable, else AVX512_BF16 on AMD's cores; none otherwise (an
// Intel core without usable AMX runs vdpbf16ps at half its FP32 FMA rate: FP32 is faster).
std::optional<Bf16Unit> bf16_unit();

// Quantized inference (ONNX Runtime's DynamicQuantizeLSTM, PyTorch's quantize_dynamic).
//   none (default): the GEMMs are FP32 (or bf16, as fpmath says).
//   int8_dynamic: inference only (a training plan is refused with an Error). The GEMMs on the
//     packed weights (input projections, recurrent products, the LSTM projection, both GEMMs of
//     the reset-before GRU) multiply int8 weights, quantized once as they are packed
//     (symmetric, one scale per output channel: max|row| / 127), by activations quantized as
//     each GEMM reads them: every row of x, and of h at every step, gets its own dynamic scale
//     (max|row| / 127) and is stored as uint8 with zero point 128 (the avx2 unit: max|row| / 63,
//     zero point 64; codegen/int8_unit.hpp). Products are summed in int32
//     and dequantized (scale of the row x scale of the channel) into FP32 gates; biases, gate
//     math and states stay FP32. Where the CPU has no int8 unit (int8_unit()) or the plan's isa
//     has no int8 GEMM, the plan falls back to bf16 (where bf16_unit() runs) or FP32 and says
//     why in its notes. Results differ from FP32 by the quantization of both operands.
enum class Quantize : std::uint8_t { none = 0, int8_dynamic = 1 };
std::string_view to_string(Quantize q);
Quantize parse_quantize(std::string_view name);  // "none"|"int8_dynamic" (also "int8")
// What runs the int8 GEMMs of Quantize::int8_dynamic, on the same packed weights and quantized
// rows: AVX512-VNNI's vpdpbusd on zmm registers (AMD Zen 4 and Zen 5, Intel from Cascade Lake
// on), AMX-INT8 tiles (TDPBUSD; Intel from Sapphire Rapids on), AVX-VNNI's VEX vpdpbusd on ymm
// registers (Intel from Alder Lake on; the AVX2 kernels' dot step), or avx2 (any AVX2 + FMA
// CPU: vpmaddubsw + vpmaddwd, whose int16 pair sums would saturate with 8-bit activations, so
// this unit quantizes activations to 7 bits; codegen/int8_unit.hpp).
enum class Int8Unit : std::uint8_t { avx512_vnni = 0, amx = 1, avx_vnni = 2, avx2 = 3 };
std::string_view to_string(Int8Unit unit);
Int8Unit parse_int8_unit(std::string_view name);  // "avx512_vnni"|"amx"|"avx_vnni"|"avx2"
// Whether this CPU has AVX512_VNNI beside AVX-512 F, DQ, BW and VL.
bool avx512_vnni_usable();
// Whether this CPU runs AMX-INT8 tiles (with AVX-512, for the kernels' epilogue) and the OS
// lets this process use them (as amx_bf16_usable()).
bool amx_int8_usable();
// Whether this CPU has AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX bit 4) beside AVX2 and FMA.
bool avx_vnni_usable();
// Whether this CPU runs `unit`'s kernels (the avx2 unit: any AVX2 + FMA CPU).
bool int8_unit_usable(Int8Unit unit);
// The unit this process runs int8 GEMMs on: RNNJIT_INT8_UNIT where set (an Error if this CPU
// cannot run it), else the first this CPU runs of AMX-INT8, AVX512-VNNI, AVX-VNNI and avx2;
// none where it has not even AVX2. With `isa` avx2 (a plan of that isa), the AVX-512 units are
// passed over unless RNNJIT_INT8_UNIT forces one (the planner then falls back and says why).
std::optional<Int8Unit> int8_unit(Isa isa = Isa::avx512);

// The most threads a plan is split across (Options::threads, RNNJIT_NUM_THREADS, --threads).
inline constexpr int kMaxThreads = 256;

struct Options {
  Backend backend = Backend::automatic;
  Isa isa = Isa::detect;
  int threads = 0;  // 1 to kMaxThreads; 0: RNNJIT_NUM_THREADS if set, else every hardware thread
  Device device = Device::cpu;
  ProjectionGemm projection_gemm = ProjectionGemm::generated;  // CPU, AVX-512 plans
  FpMath fpmath = FpMath::strict;                              // CPU, AVX-512 plans
  Quantize quantize = Quantize::none;                          // CPU, AVX-512 plans, inference only
};

// Shapes below are for sequence-major tensors; with RnnConfig::batch_first, x, y, dx and dy
// are [N, T, *]. S is the width of h (RnnConfig::state_size(): P with a projection, else H).
struct ForwardIo {
  std::span<const float> x;   // [T, N, I]
  std::span<const float> hx;  // [L*D, N, S] or empty: zeros (the CPU skips the first step's h0 W_hh^T)
  std::span<const float> cx;  // [L*D, N, H] or empty (LSTM)
  std::span<float> y;         // [T, N, D*S] (S with sum_directions: config.output_size())
  std::span<float> hy;        // [L*D, N, S] or empty
  std::span<float> cy;        // [L*D, N, H] or empty (LSTM)
  // Weights already packed by Execution::pack_weights (cuDNN's "weight space"), or empty to
  // pack them in this call. Packing costs a pass over the weights: inference callers whose
  // weights do not change pack once.
  std::span<const std::byte> packed_weights;
  // Variable-length sequences (cuDNN's padded layout, PyTorch's pack_padded_sequence): N lengths
  // in [1, T], any order, or empty for all T. Element n reads x only up to its length; y past it
  // is zero, hy/cy are its state at its own last step, and the reverse direction starts there.
  // Forward training keeps them in the reserve for backward. Host memory on every device (with
  // Device::cuda too, where forward uploads them).
  std::span<const std::int32_t> seq_lengths;
  // Dropout between layers (RnnConfig::dropout, training only): the masks are a pure function
  // of this seed, the same on every backend and thread count.
  std::uint64_t dropout_seed = 0;
};

// Gradients past an element's sequence length are ignored in dy and written as zeros in dx.
struct BackwardDataIo {
  std::span<const float> dy;   // shaped as y
  std::span<const float> dhy;  // [L*D, N, S] or empty
  std::span<const float> dcy;  // [L*D, N, H] or empty (LSTM)
  std::span<float> dx;         // [T, N, I]
  std::span<float> dhx;        // [L*D, N, S] or empty (the CPU then skips the last step's dh W_hh)
  std::span<float> dcx;        // [L*D, N, H] or empty (LSTM)
};

struct BackwardWeightsIo {
  std::span<const float> x;    // the forward call's x (initial states are kept in the reserve)
  std::span<float> dweights;   // canonical layout, weights_size() elements
  bool accumulate = false;     // add into dweights instead of overwriting it
};

struct Plan;          // codegen/plan.hpp: plain data, printable
class ExecutionImpl;
class DeviceExecution;  // runtime/device_execution.hpp: Options::device other than cpu

class Execution {
 public:
  Execution(Execution&&) noexcept;
  Execution& operator=(Execution&&) noexcept;
  ~Execution();

  const RnnConfig& config() const;
  Shape shape() const;
  Mode mode() const;
  Backend backend() const;  // the backend actually used (never automatic)
  const Plan& plan() const;
  std::string plan_text() const;
  std::string plan_json() const;

  std::size_t workspace_size() const;  // bytes of scratch, free between calls
  std::size_t reserve_size() const;    // bytes kept from forward training to backward (0 in inference)
  // Bytes of a packed-weights buffer (0 when nothing is packed): a small header naming the
  // layout, then the panels from the first 64-byte boundary, so any alignment of the buffer works.
  std::size_t packed_weights_size() const;

  // Packs weights into the layout of the generated GEMMs, for ForwardIo::packed_weights. Plans
  // with the same layout share packed weights; forward refuses (Error) a buffer pack_weights did
  // not write or wrote for another layout.
  void pack_weights(std::span<const float> weights, std::span<std::byte> packed) const;

  // Empty reserve/workspace spans mean the Execution's own buffers.
  void forward(std::span<const float> weights, const ForwardIo& io, std::span<std::byte> reserve = {},
               std::span<std::byte> workspace = {});
  void backward_data(std::span<const float> weights, const BackwardDataIo& io, std::span<std::byte> reserve = {},
                     std::span<std::byte> workspace = {});
  void backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve = {},
                        std::span<std::byte> workspace = {});

  // Number of times this Execution allocated its own workspace or reserve (steady state: no growth).
  std::uint64_t allocations() const;

 private:
  friend class Rnn;
  explicit Execution(std::unique_ptr<ExecutionImpl> impl);
  explicit Execution(std::unique_ptr<DeviceExecution> device);
  std::unique_ptr<ExecutionImpl> impl_;
  std::unique_ptr<DeviceExecution> device_;  // set instead of impl_ for Device::cuda
};

class Rnn {
 public:
  explicit Rnn(const RnnConfig& config, Options options = {});  // validates config
  const RnnConfig& config() const { return layout_.config(); }
  const WeightLayout& weight_layout() const { return layout_; }
  std::int64_t weights_size() const { return layout_.total_elements(); }  // elements
  const Options& options() const { return options_; }

  // Plans and compiles for one shape and mode, through the process-wide cache.
  Execution prepare(const Shape& shape, Mode mode) const;

 private:
  WeightLayout layout_;
  Options options_;
};

struct CacheStats {
  std::uint64_t kernel_hits = 0, kernel_misses = 0, plan_hits = 0, plan_misses = 0;
  std::size_t kernels = 0, plans = 0, capacity = 0;
};
CacheStats cache_stats();
void clear_cache();  // drops cached plans and kernels that no Execution still uses

}  // namespace rnnjit
