// rnn-jit bench: times the whole forward (inference) or forward + backward data + backward
// weights (train) of one configuration after a warm-up, and prints median and min ms and
// GFLOPS. With --compare, peers run interleaved with rnnjit, rep by rep, in the same process,
// and the ratio peer/rnnjit is printed (noise on a shared machine hits both alike). Every timed
// iteration starts once the process's other threads are idle: a runtime that spins after its
// call (OpenMP, OpenBLAS) would otherwise be timed as part of the next contender.
//
// FLOPs count the GEMMs only: forward 2*T*N*G*H*(I_l + S) per layer and direction (plus the
// projection's 2*T*N*P*H); training three times that (forward, backward data, backward
// weights); less the first step's recurrent products, zero in these calls that start from
// zero states (no hx), and in training the last backward step's, which only dhx (not asked
// for) would read, and dW_hh's terms in the zero h0 (zero_state_flops()): rnnjit's CPU
// executor computes almost none of them (oneDNN and the CUDA executor do; every contender is
// credited the same FLOPs). --mixed-lengths runs variable-length sequences
// (lengths drawn in [1, T], the longest T) and still counts the padded FLOPs, so that its time
// compares with the padded run's.
// --device cuda times rnnjit's CUDA executor on device data (tools/rnn-jit/bench_cuda.hpp), and
// --compare cudnn cuDNN's RNN on the same data; each iteration ends when the device is done.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/fma_peak.hpp"
#include "bench/gemm_ceiling.hpp"
#include "bench/read_bandwidth.hpp"
#include "bench/onednn_peer.hpp"
#include "bench/quiet_cores.hpp"
#include "codegen/plan.hpp"
#include "rnnjit/rnn.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "tools/rnn-jit/bench_cuda.hpp"
#include "tools/rnn-jit/bench_int8_check.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

struct BenchFlags {
  ConfigFlags config{.cell = "lstm", .input_size = 800, .hidden_size = 800, .layers = 1, .bidirectional = false};
  ShapeFlags shape{.seq = 300, .batch = 20, .mode = "infer"};
  BackendFlags backend;
  int reps = 10;
  int warmup = 2;
  bool json = false;
  bool peak = false;
  bool mixed_lengths = false, unsorted_lengths = false;
  std::vector<std::string> compare;
  std::string device = "cpu";
  std::string isa;  // empty: RNNJIT_ISA, else the CPU's best
};

using Clock = std::chrono::steady_clock;

struct Timings {
  std::string name;
  std::vector<double> ms;
  double median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
  }
  double min() const { return ms.empty() ? 0.0 : *std::min_element(ms.begin(), ms.end()); }
};

// One contender: a closure that runs one full iteration.
struct Contender {
  std::string name;
  std::function<void()> iteration;
  FpMath fpmath = FpMath::strict;  // rnnjit on the CPU: the GEMM math its plan runs
  Bf16Unit bf16_unit = Bf16Unit::amx;  // with fpmath bf16: the unit that runs it
  Quantize quantize = Quantize::none;  // rnnjit on the CPU: int8_dynamic where its plan runs int8
  std::string library;             // a library's peer: which version runs (oneDNN's dnnl_version())
  std::string about;               // and what it runs, in one line (OnednnRnn's run_info())
};

struct Data {
  std::vector<float> w, x, y, hy, cy, dy, dx, dw;
  std::vector<std::int32_t> lengths;
};

Data make_data(const RnnConfig& config, const Shape& shape) {
  std::mt19937_64 rng(1);
  auto fill = [&](std::vector<float>& v, std::int64_t n, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    v.resize(static_cast<std::size_t>(n));
    for (float& e : v) e = u(rng);
  };
  Data d;
  fill(d.w, WeightLayout(config).total_elements(), 1.0f / std::sqrt(static_cast<float>(config.hidden_size)));
  fill(d.x, x_elements(config, shape), 1.0f);
  fill(d.dy, y_elements(config, shape), 1.0f);
  d.y.resize(static_cast<std::size_t>(y_elements(config, shape)));
  d.hy.resize(static_cast<std::size_t>(state_elements(config, shape)));
  if (config.cell == CellKind::lstm) d.cy.resize(static_cast<std::size_t>(cell_state_elements(config, shape)));
  d.dx.resize(d.x.size());
  d.dw.resize(d.w.size());
  return d;
}

// Inference packs the weights once, as an engine with fixed weights does (oneDNN likewise
// reorders its weights once at set-up); training packs them in every iteration.
Contender rnnjit_contender(const std::string& name, const RnnConfig& config, const Shape& shape, Mode mode,
                           Options options, Data& d) {
  auto ex = std::make_shared<Execution>(Rnn(config, options).prepare(shape, mode));
  auto packed = std::make_shared<std::vector<std::byte>>(mode == Mode::inference ? ex->packed_weights_size() : 0);
  if (!packed->empty()) ex->pack_weights(d.w, *packed);
  return {name,
          [ex, mode, packed, &d] {
            ex->forward(d.w, {.x = d.x, .y = d.y, .hy = d.hy, .cy = d.cy, .packed_weights = *packed,
                              .seq_lengths = d.lengths});
            if (mode == Mode::training) {
              ex->backward_data(d.w, {.dy = d.dy, .dx = d.dx});
              ex->backward_weights({.x = d.x, .dweights = d.dw});
            }
          },
          ex->plan().fpmath, ex->plan().bf16_unit, ex->plan().quantize};
}

Contender peer(const std::string& name, const RnnConfig& config, const Shape& shape, Mode mode, const Options& options,
               int threads, Data& d, Device device) {
  if (name == "cudnn" || name == "cudnn_persistent") {  // on the GPU, with the same data as rnnjit's CUDA contender
    if (!cuda::built_with_cuda())
      throw UsageError(fmt::format("--compare {}: rnn-jit was built without the CUDA toolkit", name));
    if (device != Device::cuda) throw UsageError(fmt::format("--compare {} needs --device cuda", name));
    const cuda::CudnnAlgo algo =
        name == "cudnn_persistent" ? cuda::CudnnAlgo::persistent_static : cuda::CudnnAlgo::standard;
    return {name, cudnn_iteration(config, shape, mode, {d.w, d.x, d.dy}, algo)};
  }
  if (name == "onednn" || name == "onednn_bf16" || name == "onednn_int8") {
    if (!bench::onednn_available())
      throw UsageError(fmt::format("--compare {}: oneDNN was not found when rnn-jit was built", name));
    const bool bf16 = name == "onednn_bf16";
    RnnConfig plain{config.cell, config.input_size, config.hidden_size, config.num_layers, config.bidirectional};
    plain.peephole = config.peephole;              // oneDNN's peephole LSTM
    plain.sum_directions = config.sum_directions;  // oneDNN's bidirectional_sum
    plain.proj_size = config.proj_size;            // oneDNN's projection LSTM
    plain.relu_alpha = config.relu_alpha;          // eltwise_relu's alpha
    plain.reverse = config.reverse;                // unidirectional_right2left
    plain.batch_first = config.batch_first;        // ntc
    plain.bias = config.bias;                      // a zero bias
    if (!(config == plain) || !d.lengths.empty())
      throw UsageError("--compare onednn: the oneDNN peer runs plain configurations only (no --clip, --dropout, "
                       "--gate-clip, --input-forget, --independent-stacks or --mixed-lengths; --direction reverse "
                       "and bidirectional_sum, --batch-first, --no-bias, --peephole, --proj-size and --relu-alpha "
                       "are supported)");
    if (name == "onednn_int8") {  // oneDNN's int8 RNN, checked against rnnjit's FP32 output before it is timed
      if (mode != Mode::inference) throw UsageError("--compare onednn_int8: oneDNN's int8 RNN runs inference only");
      if (config.proj_size > 0) throw UsageError("--compare onednn_int8: the int8 peer runs no --proj-size");
      auto int8 = std::make_shared<bench::OnednnInt8Rnn>(config, shape, d.w, d.x, threads);
      const std::string check = check_int8_peer(config, shape, d.w, d.x, threads, *int8);
      const bench::PeerRun info = int8->run_info();
      return {name, [int8, &d] { int8->forward({.x = d.x, .y = d.y, .hy = d.hy, .cy = d.cy}); }, FpMath::strict,
              Bf16Unit::amx, Quantize::int8_dynamic, info.library, info.summary() + "; " + check};
    }
    if (bf16 && config.proj_size > 0) throw UsageError("--compare onednn_bf16: the bf16 peer runs no --proj-size");
    auto dnnl = std::make_shared<bench::OnednnRnn>(config, shape, mode, d.w, threads, bf16);
    const bench::PeerRun info = dnnl->run_info();
    return {name,
            [dnnl, mode, &d] {
              dnnl->forward({.x = d.x, .y = d.y, .hy = d.hy, .cy = d.cy});
              if (mode == Mode::training) dnnl->backward({.dy = d.dy, .dx = d.dx});
            },
            FpMath::strict, Bf16Unit::amx, Quantize::none, info.library, info.summary()};
  }
  if (name == "baseline")  // MXNet's CPU design: OpenBLAS GEMMs and plain C++ gate loops
    return rnnjit_contender(name, config, shape, mode, {Backend::jit, Isa::reference}, d);
  if (name == "reference") return rnnjit_contender(name, config, shape, mode, {Backend::reference, Isa::detect}, d);
  if (name == "strict" || name == "bf16") {  // rnnjit itself with FP32 (or bf16) GEMMs: what --fpmath bf16 or
                                             // --quantize int8 gains
    if (device != Device::cpu) throw UsageError(fmt::format("--compare {} runs on the CPU only", name));
    Options other = options;
    other.fpmath = name == "bf16" ? FpMath::bf16 : FpMath::strict;
    other.quantize = Quantize::none;
    return rnnjit_contender(name, config, shape, mode, other, d);
  }
  throw UsageError(fmt::format(
"--compare: unknown peer '{}' (expected onednn, onednn_bf16, onednn_int8, baseline, reference, strict or bf16); "
      "cudnn and "
      "cudnn_persistent with --device cuda",
      name));
}

// What --fpmath bf16 came to in the plan that ran, and why where it stayed FP32.
const char* fpmath_outcome(const Contender& ours, const Options& options, Mode mode, Device device) {
  if (ours.fpmath == FpMath::bf16 && mode == Mode::training)
    return ours.bf16_unit == Bf16Unit::amx
               ? "every GEMM, forward and backward, takes bf16 inputs on AMX tiles; weights and gradients stay FP32"
               : "every GEMM, forward and backward, takes bf16 inputs on AVX512_BF16 dot products; weights and "
                 "gradients stay FP32";
  if (ours.fpmath == FpMath::bf16)
    return ours.bf16_unit == Bf16Unit::amx ? "the GEMMs on the weights take bf16 inputs on AMX tiles"
                                           : "the GEMMs on the weights take bf16 inputs on AVX512_BF16 dot products";
  if (device == Device::cuda) return "the CUDA executor's GEMMs are FP32";
  if (options.backend == Backend::reference) return "the reference backend computes in FP32";
  if (!bf16_unit()) return "this CPU (or OS) runs neither AMX-BF16 nor AVX512_BF16, so FP32";
  return "the plan's instruction set has no bf16 GEMM, so FP32";
}

int bench(const BenchFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  Options options = build_options(f.backend);
  options.isa = build_isa(f.isa, "--isa");
  validate_flags(config, shape);
  if (f.reps < 1) throw UsageError(fmt::format("--reps must be positive, got {}", f.reps));
  if (f.warmup < 0) throw UsageError(fmt::format("--warmup must not be negative, got {}", f.warmup));
  Device device = Device::cpu;
  try {
    device = parse_device(f.device);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--device: {}", e.what()));
  }
  for (const char* cudnn : {"cudnn", "cudnn_persistent"})
    if (f.mixed_lengths && std::find(f.compare.begin(), f.compare.end(), cudnn) != f.compare.end())
      throw UsageError(fmt::format("--compare {}: the cuDNN peer runs every element for all T steps (no --mixed-lengths)",
                                   cudnn));
  if (device == Device::cuda && options.backend == Backend::reference)
    throw UsageError("--backend reference runs on the CPU only (not with --device cuda)");
  if (device == Device::cuda && f.peak) throw UsageError("--peak measures the CPU's FMA peak (not with --device cuda)");

  Data d = make_data(config, shape);
  if (f.mixed_lengths) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::int32_t> u(1, static_cast<std::int32_t>(shape.seq_len));
    for (std::int64_t n = 0; n < shape.batch; ++n) d.lengths.push_back(n == 0 ? static_cast<std::int32_t>(shape.seq_len) : u(rng));
    if (!f.unsorted_lengths) std::sort(d.lengths.begin(), d.lengths.end(), std::greater<>());
  }
  std::vector<Contender> contenders{
      device == Device::cuda ? Contender{"rnnjit", cuda_rnnjit_iteration(config, shape, mode, {d.w, d.x, d.dy, d.lengths})}
                             : rnnjit_contender("rnnjit", config, shape, mode, options, d)};
  const int threads = Rnn(config, options).options().threads;
  // oneDNN runs the ISA rnnjit's plan runs (its sgemm in the ceiling too): capped at AVX2 with it.
  if (device == Device::cpu && bench::onednn_available()) bench::onednn_cap_isa(options.isa);
  for (const std::string& p : f.compare) contenders.push_back(peer(p, config, shape, mode, options, threads, d, device));
  // With --fpmath bf16, --compare onednn times oneDNN's bf16 primitives as well (onednn_bf16,
  // beside its FP32 ones): left out, with a note, where oneDNN runs no bf16 RNN here.
  const auto named = [&](const char* p) { return std::find(f.compare.begin(), f.compare.end(), p) != f.compare.end(); };
  if (options.fpmath == FpMath::bf16 && device == Device::cpu && named("onednn") && !named("onednn_bf16")) {
    try {
      contenders.push_back(peer("onednn_bf16", config, shape, mode, options, threads, d, device));
    } catch (const std::runtime_error& e) {  // rnnjit::Error (oneDNN's refusal) or UsageError
      fmt::print(stderr, "bench: --fpmath bf16: oneDNN's bf16 peer (onednn_bf16) left out: {}\n", e.what());
    }
  }
  // With --quantize int8 (inference), --compare onednn times oneDNN's int8 RNN as well (onednn_int8):
  // left out, with a note, where oneDNN runs none of this configuration here or its result is off.
  std::string int8_left_out;
  if (options.quantize == Quantize::int8_dynamic && mode == Mode::inference && device == Device::cpu &&
      named("onednn") && !named("onednn_int8")) {
    try {
      contenders.push_back(peer("onednn_int8", config, shape, mode, options, threads, d, device));
    } catch (const std::runtime_error& e) {  // rnnjit::Error (oneDNN's refusal, the check) or UsageError
      int8_left_out = e.what();  // the text's peer rows say so; the JSON under "left_out"
      if (f.json) fmt::print(stderr, "bench: --quantize int8: oneDNN's int8 peer (onednn_int8) left out: {}\n", int8_left_out);
    }
  }

  const bool progress = !f.json && isatty(STDERR_FILENO);
  std::vector<Timings> timings;
  for (const Contender& c : contenders) timings.push_back({c.name, {}});
  for (int w = 0; w < f.warmup; ++w)
    for (const Contender& c : contenders) c.iteration();
  for (int r = 0; r < f.reps; ++r) {
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      // Not on cores a runtime still spins on (bench/quiet_cores.hpp); the GPU times device work.
      if (device == Device::cpu) bench::wait_for_quiet_cores();
      const auto start = Clock::now();
      contenders[i].iteration();
      timings[i].ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    if (progress) fmt::print(stderr, "\rrep {}/{}", r + 1, f.reps);
  }
  if (progress) fmt::print(stderr, "\n");

  const bool training = mode == Mode::training;
  const double flops = forward_flops(config, shape) * (training ? 3.0 : 1.0) - zero_state_flops(config, shape, training);
  const Timings& ours = timings.front();
  if (f.peak) bench::wait_for_quiet_cores();
  const double peak = f.peak ? bench::measure_fma_peak(threads, 0.3, options.isa) : 0.0;
  const double ours_gflops = flops / (ours.median() * 1e6);
  // The weight-streaming bound: every recurrent step reads its layer's W_hh and W_hr (forward,
  // and backward data again in training; no W_hh in the first forward step, whose h0 is zero,
  // nor in the last backward one, without dhx), each thread its share of a layer's directions,
  // at the rate the threads read working sets of that size now.
  // bf16 weights (the forward pass of a plan with --fpmath bf16) are half the bytes; backward
  // data reads them in FP32.
  // int8 weights (--quantize int8, inference) a quarter.
  const bool bf16 = contenders.front().fpmath == FpMath::bf16;
  const bool int8 = contenders.front().quantize == Quantize::int8_dynamic;
  const double narrowed = int8 ? 0.25 : bf16 ? 0.5 : 1.0;
  const double step_bytes = recurrent_weight_bytes(config) * narrowed;
  const double passes = narrowed + (training ? 1.0 : 0.0);  // in FP32 weights' bytes
  const double streamed_bytes = passes *
                                (static_cast<double>(shape.seq_len) * recurrent_weight_bytes(config) - w_hh_bytes(config)) *
                                static_cast<double>(config.num_layers) * config.directions();
  const auto share = static_cast<std::int64_t>(step_bytes * config.directions() / threads);
  const double read_gbps = peak > 0 ? bench::measure_read_bandwidth(threads, share) : 0.0;
  const double bound_ms = read_gbps > 0 ? streamed_bytes / (read_gbps * 1e6) : 0.0;
  // What FP32 GEMMs reach on the same threads now, the generated tile with its operands in L1
  // among them: the ceiling an FP32 RNN's fraction of the peak is read against.
  const bench::GemmCeiling ceiling = peak > 0 ? bench::measure_gemm_ceiling(threads) : bench::GemmCeiling{};
  if (f.json) {
    nlohmann::json j{{"cell", std::string(to_string(config.cell))}, {"input_size", config.input_size},
                     {"hidden_size", config.hidden_size}, {"layers", config.num_layers},
                     {"bidirectional", config.bidirectional}, {"seq", shape.seq_len}, {"batch", shape.batch},
                     {"mode", mode == Mode::training ? "train" : "infer"}, {"reps", f.reps},
                     {"backend", std::string(to_string(options.backend))}, {"median_ms", ours.median()},
                     {"min_ms", ours.min()}, {"gflops", ours_gflops}, {"threads", threads},
                     {"config", describe(config)}, {"mixed_lengths", f.mixed_lengths},
                     {"sorted_lengths", f.mixed_lengths && !f.unsorted_lengths},
                     {"device", std::string(to_string(device))}, {"fpmath", std::string(to_string(options.fpmath))},
                     {"quantize", std::string(to_string(contenders.front().quantize))},
                     {"isa", std::string(to_string(options.isa))}};
    if (peak > 0) j.update({{"peak_gflops", peak}, {"peak_fraction", ours_gflops / peak}});
    if (ceiling.size > 0)
      j["gemm_ceiling"] = {{"size", ceiling.size}, {"openblas_gflops", ceiling.openblas},
                           {"onednn_gflops", ceiling.onednn}, {"rnnjit_gflops", ceiling.rnnjit},
                           {"tile_in_l1_gflops", ceiling.tile_in_l1}};
    if (bound_ms > 0)
      j.update({{"weights_read_gbps", read_gbps}, {"weights_bound_ms", bound_ms},
                {"weights_bound_fraction", bound_ms / ours.median()}});
    for (std::size_t i = 1; i < timings.size(); ++i) {
      nlohmann::json& p = j["peers"][timings[i].name];
      p = {{"median_ms", timings[i].median()}, {"min_ms", timings[i].min()},
           {"gflops", flops / (timings[i].median() * 1e6)}, {"ratio", timings[i].median() / ours.median()}};
      if (!contenders[i].library.empty()) p.update({{"library", contenders[i].library}, {"run", contenders[i].about}});
    }
    if (!int8_left_out.empty()) j["left_out"]["onednn_int8"] = int8_left_out;
    // The oneDNN that ran (dnnl_version() at run time), whichever of its peers ran.
    for (const Contender& c : contenders)
      if (c.name.starts_with("onednn")) j["onednn_version"] = bench::onednn_version();
    fmt::print("{}\n", j.dump());
    return kExitOk;
  }
  const char* lengths = !f.mixed_lengths     ? ""
                        : f.unsorted_lengths ? " mixed lengths (unsorted)"
                                             : " mixed lengths (longest first)";
  fmt::print("{} {}{} mode={} reps={} {} ({:.3f} GFLOP per iteration)\n", describe(config), describe(shape), lengths,
             mode == Mode::training ? "train" : "infer", f.reps,
             device == Device::cuda ? std::string("device=cuda") : fmt::format("threads={}", threads), flops * 1e-9);
  if (options.fpmath == FpMath::bf16) fmt::print("  fpmath bf16: {}\n", fpmath_outcome(contenders.front(), options, mode, device));
  if (options.quantize == Quantize::int8_dynamic)
    fmt::print("  quantize int8: {}\n",
               contenders.front().quantize == Quantize::int8_dynamic
                   ? "int8 weights and activations (AMX-INT8, AVX512-VNNI, AVX-VNNI or AVX2: rnn-jit plan says which), gate math FP32"
                   : "not run here (see rnn-jit plan --quantize int8 for why): the plan's GEMMs are bf16 or FP32");
  if (peak > 0)
    fmt::print("  FMA peak measured now ({} FMAs): {:.1f} GFLOPS on {} threads; rnnjit reaches {:.0f}% of it{}\n",
               options.isa == Isa::avx2 ? "ymm" : "zmm", peak, threads, 100.0 * ours_gflops / peak,
               int8 ? " (its GEMMs run on int8 dot products, not FMAs)"
               : bf16 ? " (its GEMMs run on AMX tiles, not FMAs)" : "");
  if (ceiling.size > 0) {
    auto rate = [&](const char* name, double gflops) {
      return gflops > 0 ? fmt::format(", {} {:.1f} ({:.0f}%)", name, gflops, 100.0 * gflops / peak) : std::string();
    };
    fmt::print("  FP32 GEMM ceiling now ({0} x {0} x {0}, {1} threads): OpenBLAS sgemm {2:.1f} GFLOPS ({3:.0f}% of the "
               "peak){4}{5}{6}\n",
               ceiling.size, threads, ceiling.openblas, 100.0 * ceiling.openblas / peak,
               rate("oneDNN's dnnl_sgemm", ceiling.onednn), rate("rnnjit's generated GEMM (W packed)", ceiling.rnnjit),
               rate(options.isa == Isa::avx2 ? "and its 6 x 1 tile (AVX2) with A and B in L1"
                                             : "and its 5 x 5 tile with A and B in L1",
                    ceiling.tile_in_l1));
  }
  if (bound_ms > 0)
    fmt::print("  weight-streaming bound: {:.2f} MB of recurrent weights a step ({:.2f} MB a thread) read at {:.1f} "
               "GB/s measured now: {:.2f} ms; rnnjit runs at {:.0f}% of it\n",
               step_bytes * 1e-6, static_cast<double>(share) * 1e-6, read_gbps, bound_ms,
               100.0 * bound_ms / ours.median());
  for (const Contender& c : contenders)
    if (!c.about.empty()) fmt::print("  {}: {}\n", c.name, c.about);
  for (const Timings& t : timings)
    fmt::print("  {:<12} median {:9.2f} ms  min {:9.2f} ms  {:7.1f} GFLOPS{}\n", t.name, t.median(), t.min(),
               flops / (t.median() * 1e6),
               &t == &ours ? std::string() : fmt::format("  ratio {}/rnnjit {:.2f}", t.name, t.median() / ours.median()));
  if (!int8_left_out.empty()) fmt::print("  {:<12} left out: {}\n", "onednn_int8", int8_left_out);
  return kExitOk;
}

CommandAction setup_bench(CLI::App& sub) {
  auto f = std::make_shared<BenchFlags>();
  add_config_flags(sub, f->config, false);
  add_shape_flags(sub, f->shape, false);
  add_backend_flags(sub, f->backend);
  sub.add_option("--isa", f->isa,
                 "instruction set of rnnjit's generated code: avx512, avx2 or reference (default: the CPU's best, or "
                 "RNNJIT_ISA when set); with avx2 the oneDNN peer is capped at AVX2 too (dnnl::set_max_cpu_isa), "
                 "and --peak measures ymm FMAs");
  sub.add_option("--reps", f->reps, "timed iterations (default 10)");
  sub.add_option("--warmup", f->warmup, "untimed iterations first (default 2)");
  sub.add_flag("--json", f->json, "print exactly one JSON object for the case");
  sub.add_flag("--peak", f->peak,
               "after the timed runs, also measure the FMA peak of the same threads, the rate they read each "
               "thread's share of W_hh at (the weight-streaming bound of the recurrence), and the FP32 GEMM "
               "ceiling (OpenBLAS's and oneDNN's sgemm and rnnjit's generated GEMM on a 2048^3 problem, and its 5 x 5 "
               "tile, AVX2's 6 x 1, with A and B in L1), all with the vectors of --isa");
  CLI::Option* mixed = sub.add_flag("--mixed-lengths", f->mixed_lengths,
                                    "variable-length sequences: lengths drawn in [1, T] (the longest T), sorted "
                                    "longest first as PyTorch packs them; FLOPs stay the padded ones");
  sub.add_flag("--unsorted-lengths", f->unsorted_lengths, "with --mixed-lengths: leave the lengths in the order drawn")
      ->needs(mixed);
  sub.add_option("--compare", f->compare,
                 "peers timed in the same run: onednn, onednn_bf16 (its RNN primitives on bf16 data and weights; "
                 "with --fpmath bf16, onednn times it too), onednn_int8 (its int8 RNN: u8 data, s8 weights, scales "
                 "from the data, checked against rnnjit's FP32 output; with --quantize int8, onednn times it too), baseline (OpenBLAS + plain C++ gate loops, MXNet's design), reference, strict (rnnjit "
                 "with FP32 GEMMs, beside --fpmath bf16 or --quantize int8), bf16 (rnnjit with --fpmath bf16, beside --quantize int8); cudnn (cuDNN's standard algorithm) and cudnn_persistent (its "
                 "persistent kernels) with --device cuda")
      ->delimiter(',');
  sub.add_option("--device", f->device, "cpu or cuda (rnnjit's CUDA executor; builds with the CUDA toolkit)")
      ->capture_default_str();
  return [f] { return bench(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(bench, "time forward (infer) or forward+backward (train), optionally against peers", setup_bench);

}  // namespace rnnjit::cli
