// The CUDA path without a GPU: every generated gate kernel (all cells, the reset-before GRU's two
// parts, forward inference and training, backward; H with tails; the LSTM cell clip, ONNX's gate
// clip on every cell, LSTM peepholes and coupled input/forget gates, the leaky ReLU's slope, alone
// and together) compiles with NVRTC to PTX, and the generated source's math runs on the host —
// compiled by the system compiler behind a small shim that plays the CUDA grid — against the
// scalar twins (kernels/gate_reference.hpp), with gate clips that clamp and, backward, stored
// activations planted exactly at the clip's bounds. The persistent recurrent kernels: their
// shapes (fit the device, cover every unit, refuse what they cannot run), NVRTC compiles of
// every forward cell and feature, and the kernel itself run on the host (a host thread per CUDA
// thread) against the step-by-step twin; on a GPU: test_cuda_executor.
#include <gtest/gtest.h>

#include <bit>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <type_traits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/persistent_source.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/planner.hpp"
#include "tests/onnx_functions.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;

KernelDesc cuda_desc(CellKind cell, Pass pass, bool training, std::uint32_t H, std::uint32_t cols, std::uint32_t rows,
                     std::uint32_t ld_h) {
  KernelDesc d;
  d.kind = static_cast<std::uint8_t>(KernelKind::gate);
  d.isa = static_cast<std::uint8_t>(Isa::cuda);
  d.cell = static_cast<std::uint8_t>(cell);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = training;
  d.hidden = H;
  d.cols = cols;
  d.rows = rows;
  d.ld_h = ld_h;
  d.unroll = 1;
  return d;
}

// The features a descriptor can carry; each applies to the kernels of `cells`.
struct Features {
  float clip = 0.0f, gate_clip = 0.0f;
  bool peephole = false, input_forget = false;
  float relu_alpha = 0.0f;
};

std::vector<KernelDesc> every_kernel(std::uint32_t H) {
  std::vector<KernelDesc> out;
  auto add = [&](CellKind cell, const Features& f) {  // forward inference and training, backward
    for (int k = 0; k < 3; ++k)
      for (int part = 0; part < (cell == CellKind::gru_reset_before ? 2 : 1); ++part) {  // its two kernels a step
        KernelDesc d = cuda_desc(cell, k < 2 ? Pass::forward : Pass::backward, k == 1, H, H, 3, 2 * H);
        d.part = static_cast<std::uint8_t>(part);
        d.clip_bits = std::bit_cast<std::uint32_t>(f.clip);
        d.gate_clip_bits = std::bit_cast<std::uint32_t>(f.gate_clip);
        d.peephole = f.peephole;
        d.input_forget = f.input_forget;
        d.relu_alpha_bits = std::bit_cast<std::uint32_t>(f.relu_alpha);
        out.push_back(d);
      }
  };
  for (CellKind cell : kCellKinds) add(cell, {});
  add(CellKind::lstm, {.clip = 0.375f});
  // ONNX's gate clip at 0.7: most of the test's pre-activations (sums of four values in (-1, 1))
  // lie beyond it.
  for (CellKind cell : kCellKinds) add(cell, {.gate_clip = 0.7f});
  add(CellKind::lstm, {.peephole = true});
  add(CellKind::lstm, {.input_forget = true});
  add(CellKind::lstm, {.clip = 0.375f, .gate_clip = 0.7f, .peephole = true, .input_forget = true});
  add(CellKind::lstm, {.gate_clip = 0.7f, .peephole = true});
  add(CellKind::rnn_relu, {.relu_alpha = 0.3f});
  add(CellKind::rnn_relu, {.gate_clip = 0.7f, .relu_alpha = 0.3f});
  // ONNX's activations (forward inference only): each function of the list in role f, the next
  // ones in g and h, on every cell and part; the gate clip on every other one, the LSTM's cell
  // clip, peepholes and coupled gates in turn.
  const std::vector<ActivationFunction> functions = test::onnx_functions();
  const std::size_t count = std::size(functions);
  for (CellKind cell : kCellKinds)
    for (std::size_t k = 0; k < count; ++k)
      for (int part = 0; part < (cell == CellKind::gru_reset_before ? 2 : 1); ++part) {
        KernelDesc d = cuda_desc(cell, Pass::forward, false, H, H, 3, 2 * H);
        d.part = static_cast<std::uint8_t>(part);
        for (int r = 0; r < activation_role_count(cell); ++r) {
          const ActivationFunction& f = functions[(k + 3 * static_cast<std::size_t>(r)) % count];
          d.activation[r] = static_cast<std::uint8_t>(f.kind);
          d.activation_alpha_bits[r] = std::bit_cast<std::uint32_t>(f.alpha);
          d.activation_beta_bits[r] = std::bit_cast<std::uint32_t>(f.beta);
        }
        // (Not where the checker looks for outputs held at a sigmoid's or tanh's bound: an RNN's h
        // and part 0's z are ONNX's functions here.)
        if (k % 2 && !is_vanilla(cell) && !(cell == CellKind::gru_reset_before && part == 0))
          d.gate_clip_bits = std::bit_cast<std::uint32_t>(0.7f);
        if (cell == CellKind::lstm) {
          d.peephole = k % 3 == 1;
          d.input_forget = k % 3 == 2;
          d.clip_bits = k % 4 == 0 ? std::bit_cast<std::uint32_t>(0.375f) : 0u;
        }
        out.push_back(d);
      }
  // Summed directions' backward: dy's rows H apart where h's are 2H.
  for (CellKind cell : kCellKinds)
    for (int part = 0; part < (cell == CellKind::gru_reset_before ? 2 : 1); ++part) {
      KernelDesc d = cuda_desc(cell, Pass::backward, false, H, H, 3, 2 * H);
      d.part = static_cast<std::uint8_t>(part);
      d.dy_row_stride = H;
      out.push_back(d);
    }
  return out;
}

TEST(CudaSource, EveryGateKernelCompilesToPtxWithNvrtc) {
  if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  for (std::uint32_t H : {1u, 17u, 64u, 800u})
    for (const KernelDesc& d : every_kernel(H)) {
      const std::string name = kernel_name(d);
      const cuda::Compiled c = cuda::compile(cuda::gate_kernel_source(d), name, "sm_90");
      EXPECT_NE(c.ptx.find(".entry " + name), std::string::npos) << name;
      EXPECT_NE(c.ptx.find(".target sm_90"), std::string::npos) << name;
    }
}

// An H200's figures (132 SMs, 227 KiB of shared memory a block may opt in to).
constexpr int kSms = 132;
constexpr std::size_t kShared = 232448;

// Every shape persistent_shape gives fits the budget, covers every unit with at most sms / lanes
// blocks, and holds whole groups of rows; it refuses backward, the reset-before GRU, kernels over
// some units, too many rows or too much work a step, and W_hh rows that do not fit.
TEST(CudaPersistent, ShapesFitTheDeviceAndCoverEveryUnit) {
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_tanh})
    for (std::uint32_t H : {1u, 17u, 130u, 800u, 1000u})
      for (std::uint32_t N : {1u, 3u, 20u, 64u})
        for (int lanes : {1, 2})
          for (std::size_t shared : {kShared, kShared / 4}) {
            const KernelDesc d = cuda_desc(cell, Pass::forward, false, H, H, N, 2 * H);
            const auto s = cuda::persistent_shape(d, kSms, shared, lanes);
            const std::size_t w_bytes = static_cast<std::size_t>(d.gates()) * ((H + kSms / lanes - 1) / (kSms / lanes)) *
                                        H * sizeof(float);
            SCOPED_TRACE(fmt::format("{} H={} N={} lanes={} shared={}", to_string(cell), H, N, lanes, shared));
            const bool slower = static_cast<std::int64_t>(N) * H * ((H + kSms - 1) / kSms) > cuda::kPersistentMaxStepWork;
            if (!s) {  // only where it would be slower, or W_hh's rows and one group of h rows do not fit
              EXPECT_TRUE(slower || w_bytes + std::min<std::size_t>(N, 4) * H * sizeof(float) > shared);
              continue;
            }
            EXPECT_FALSE(slower);
            EXPECT_LE(s->blocks, kSms / lanes);
            EXPECT_GE(s->blocks * s->units, static_cast<int>(H));
            EXPECT_LT((s->blocks - 1) * s->units, static_cast<int>(H));
            EXPECT_LE(s->shared_bytes, shared);
            EXPECT_EQ(s->shared_bytes, (static_cast<std::size_t>(d.gates()) * s->units + s->chunk_rows) * H * 4);
            EXPECT_EQ(s->chunk_rows % s->group_rows, 0);
            EXPECT_GE(s->chunk_rows, s->group_rows);
            EXPECT_LE(s->chunk_rows, static_cast<int>((N + s->group_rows - 1) / s->group_rows * s->group_rows));
            EXPECT_EQ(s->threads % 32, 0);
          }
  const KernelDesc ds2 = cuda_desc(CellKind::lstm, Pass::forward, true, 800, 800, 20, 800);
  ASSERT_TRUE(cuda::persistent_shape(ds2, kSms, kShared, 2));  // both directions of DS2's LSTM at once
  KernelDesc d = ds2;
  d.pass = static_cast<std::uint8_t>(Pass::backward);
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  d = ds2;
  d.cell = static_cast<std::uint8_t>(CellKind::gru_reset_before);
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  d = ds2;
  d.cols = 400;
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  d = ds2;
  d.hidden = d.cols = d.ld_h = 64;
  d.rows = cuda::kPersistentMaxRows;
  EXPECT_TRUE(cuda::persistent_shape(d, kSms, kShared, 1));
  d.rows = cuda::kPersistentMaxRows + 1;
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  d = ds2;
  d.rows = 64;  // DS2's H with 64 rows: past kPersistentMaxStepWork
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  d = ds2;
  d.hidden = d.cols = d.ld_h = 2048;  // 32 MiB of W_hh
  EXPECT_FALSE(cuda::persistent_shape(d, kSms, kShared, 1));
  // A shape that is not persistent_shape's is refused by the generator.
  cuda::PersistentShape bad = *cuda::persistent_shape(ds2, kSms, kShared, 1);
  bad.units += 1;
  EXPECT_THROW(cuda::persistent_kernel_source(ds2, bad), Error);
  EXPECT_THROW(cuda::persistent_kernel_source(d, *cuda::persistent_shape(ds2, kSms, kShared, 1)), Error);
}

// Every forward cell and feature (inference and training), H with tails, one row to several
// chunks of rows (a small shared memory budget), compiles with NVRTC; the kernel is named by
// its shape.
TEST(CudaPersistent, EveryForwardKernelCompilesWithNvrtc) {
  if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  std::vector<std::pair<KernelDesc, std::size_t>> cases;
  for (KernelDesc d : every_kernel(130))
    if (d.pass_kind() == Pass::forward && d.cell_kind() != CellKind::gru_reset_before) cases.push_back({d, kShared});
  for (CellKind cell : {CellKind::lstm, CellKind::gru, CellKind::rnn_relu}) {
    cases.push_back({cuda_desc(cell, Pass::forward, true, 800, 800, 20, 1600), kShared});
    cases.push_back({cuda_desc(cell, Pass::forward, false, 257, 257, 64, 257), 40000});  // chunks of 4-8 rows
    cases.push_back({cuda_desc(cell, Pass::forward, false, 33, 33, 1, 33), kShared});
  }
  for (const auto& [d, shared] : cases) {
    const auto shape = cuda::persistent_shape(d, kSms, shared, 2);
    ASSERT_TRUE(shape) << kernel_name(d);
    const std::string name = cuda::persistent_kernel_name(d, *shape);
    EXPECT_EQ(name.find(kernel_name(d) + "_persistent_b"), 0u) << name;
    const cuda::Compiled c = cuda::compile(cuda::persistent_kernel_source(d, *shape), name, "sm_90");
    EXPECT_NE(c.ptx.find(".entry " + name), std::string::npos) << name;
  }
}

TEST(CudaSource, CompileErrorsCarryTheLogAndTheSourcePath) {
  if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  try {
    cuda::compile("extern \"C\" __global__ void broken() { this is not cuda }", "rnnjit_broken_kernel");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rnnjit_broken_kernel.cu"), std::string::npos) << what;
    EXPECT_NE(what.find("error"), std::string::npos) << what;
  }
}

TEST(CudaSource, PlannerDescriptorsNameTheCudaTarget) {
  const KernelDesc d = gate_kernel_desc({CellKind::lstm, 800, 800, 1, false}, {300, 20}, Mode::training, Isa::cuda,
                                        Pass::forward);
  EXPECT_EQ(d.isa_kind(), Isa::cuda);
  EXPECT_EQ(kernel_name(d).find("lstm_fwd_train_cuda_h800"), 0u) << kernel_name(d);
  EXPECT_NE(cuda::gate_kernel_source(d).find("extern \"C\" __global__"), std::string::npos);
  EXPECT_THROW(cuda::gate_kernel_source(gate_kernel_desc({CellKind::gru, 4, 4, 1, false}, {2, 2}, Mode::inference,
                                                         Isa::avx512, Pass::forward)),
               Error);
}

// The shim: CUDA's qualifiers become nothing, the grid is a host loop, and each generated
// translation unit lives in its own namespace so that many fit in one program.
constexpr const char* kShim = R"(#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "codegen/kernel_args.hpp"
#include "kernels/gate_reference.hpp"
#define __host__
#define __device__
#define __global__
#define __launch_bounds__(n)
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static Dim3 blockIdx, threadIdx, blockDim;
)";

// main()'s checker: for one kernel, random arguments (with a gate clip, backward: stored gates
// and h planted exactly at the activations of the bounds and at the bounds), the grid loop, the
// twin, and the worst error. Descriptors travel as their bytes.
constexpr const char* kCheck = R"(
template <class Args, class Kernel>
int check(const unsigned char (&bytes)[sizeof(rnnjit::KernelDesc)], Kernel kernel, int index) {
  rnnjit::KernelDesc d;
  std::memcpy(&d, bytes, sizeof d);
  const bool reset_before = d.cell_kind() == rnnjit::CellKind::gru_reset_before;
  std::mt19937 rng(index);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int n = static_cast<int>(d.rows * 8 * d.hidden);  // past every row stride (G*H, ld_h = 2H, 4H gates)
  std::vector<float> in[7], out_a[4], out_b[4];
  for (auto& v : in) { v.resize(n); for (float& e : v) e = u(rng); }
  for (int k = 0; k < 4; ++k) { out_a[k].resize(n); for (float& e : out_a[k]) e = u(rng); }
  volatile float opaque = d.gate_clip();
  const float b = opaque;
  const float sig_hi = 1.0f / (1.0f + std::exp(-b)), sig_lo = 1.0f / (1.0f + std::exp(b));
  const float edges[6] = {b, -b, sig_lo, sig_hi, std::tanh(-b), std::tanh(b)};
  if (d.pass == 1 && d.gate_clip_bits)
    for (int i = 0; i < n; i += 3) { in[1][i] = edges[(i / 3) % 6]; out_a[0][i] = edges[(i / 3 + 1) % 6]; }
  for (int k = 0; k < 4; ++k) out_b[k] = out_a[k];
  Args a{}, b_{};
  if constexpr (requires(Args x) { x.gx; }) {  // a forward kernel's arguments
    a.gx = in[0].data(); a.gh = in[1].data(); a.bias_ih = in[2].data(); a.bias_hh = in[3].data();
    a.h_prev = in[4].data(); a.c_prev = in[5].data(); a.peephole = in[6].data();
    b_ = a;
    a.h_out = out_a[0].data(); a.c_out = out_a[1].data(); a.gates = out_a[2].data();
    b_.h_out = out_b[0].data(); b_.c_out = out_b[1].data(); b_.gates = out_b[2].data();
  } else {
    a.dy = in[0].data(); a.h = in[1].data(); a.h_prev = in[2].data(); a.c = in[3].data(); a.c_prev = in[4].data();
    a.peephole = in[5].data(); a.d_reset_h = in[6].data();
    if (reset_before && d.part == 1) a.dy = nullptr;  // part 1 must not read it (the executors pass none)
    b_ = a;
    a.gates = out_a[0].data(); a.dh_carry = out_a[1].data(); a.dc_carry = out_a[2].data();
    b_.gates = out_b[0].data(); b_.dh_carry = out_b[1].data(); b_.dc_carry = out_b[2].data();
  }
  blockDim.x = 128;
  for (blockIdx.y = 0; blockIdx.y < d.rows; ++blockIdx.y)
    for (blockIdx.x = 0; blockIdx.x * 128 < d.cols; ++blockIdx.x)
      for (threadIdx.x = 0; threadIdx.x < 128; ++threadIdx.x) kernel(a);
  if (d.pass == 0) rnnjit::gate_forward_reference(d, *reinterpret_cast<rnnjit::GateForwardArgs*>(&b_));
  else rnnjit::gate_backward_reference(d, *reinterpret_cast<rnnjit::GateBackwardArgs*>(&b_));
  double worst = 0;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < n; ++i) {
      const double e = std::fabs(out_a[k][i] - out_b[k][i]) / (1.0 + std::fabs(out_b[k][i]));
      if (std::isnan(e) || e > worst) worst = e;  // NaN stays: nothing compares above it (fmax would drop it)
    }
  // A gate clip that clamps: forward, gates (or an RNN's h; the reset-before GRU's part 0: z,
  // also in inference) held exactly at an activation of a bound; backward, blocked gradients
  // (exact zeros where the twin has them too).
  int clamped = 0;
  const bool gated = !rnnjit::is_vanilla(d.cell_kind());
  const bool z_out = reset_before && d.part == 0;  // c_out holds z
  if (d.gate_clip_bits && d.pass == 0)
    for (int i = 0; i < n; ++i)
      for (int k : {0, 1, 2})
        for (float e : edges) clamped += (k == 0 ? !gated : k == 1 ? z_out : d.training) && out_a[k][i] == e;
  if (d.gate_clip_bits && d.pass == 1)
    for (int i = 0; i < n; ++i) clamped += out_a[0][i] == 0.0f && out_b[0][i] == 0.0f;
  const bool clamps = !d.gate_clip_bits || (d.pass == 0 && gated && !d.training && !z_out) || clamped > 0;
  std::printf("kernel %d worst %.3g clamped %d\n", index, worst, clamped);
  return worst <= 1e-6 && clamps ? 0 : 1;
}
int main() {
  int failures = 0;
)";

// The system C++ compiler for the host builds of generated source ("" when there is none).
std::string host_compiler() {
  const char* cxx = std::getenv("CXX");
  const std::string compiler = cxx && *cxx ? cxx : "c++";
  return std::system((compiler + " --version >/dev/null 2>&1").c_str()) == 0 ? compiler : "";
}

// Builds dir/driver.cpp (with the scalar twins) on the host and runs it; a failure names the log.
void build_and_run_on_host(const std::string& compiler, const fs::path& dir, const char* what) {
  const std::string src = RNNJIT_SOURCE_DIR;
  const std::string build = fmt::format(
      "cd '{}' && {} -std=c++20 -O1 -w -pthread -I'{}' -I'{}/runtime/include' driver.cpp "
      "'{}/kernels/gate_reference.cpp' '{}/codegen/kernel_desc.cpp' '{}/runtime/config.cpp' "
      "'{}/runtime/activations.cpp' '{}/runtime/names.cpp' -lfmt -o driver > build.log 2>&1",
      dir.string(), compiler, src, src, src, src, src, src, src);
  ASSERT_EQ(std::system(build.c_str()), 0) << "host build of the generated source failed; see " << dir / "build.log";
  EXPECT_EQ(std::system(fmt::format("'{}/driver' > '{}/run.log'", dir.string(), dir.string()).c_str()), 0)
      << what << "; see " << dir / "run.log";
}

TEST(CudaSource, GeneratedMathMatchesTheScalarTwinsOnTheHost) {
  const std::string compiler = host_compiler();
  if (compiler.empty()) GTEST_SKIP() << "no host C++ compiler";
  const fs::path dir = fs::temp_directory_path() / fmt::format("rnnjit_cuda_host_{}", ::getpid());
  fs::create_directories(dir);
  std::ostringstream driver;
  driver << kShim;
  // H = 17: one partial block; H = 130: a full block of 128 threads and a partial one.
  std::vector<KernelDesc> kernels = every_kernel(17);
  for (const KernelDesc& d : every_kernel(130)) kernels.push_back(d);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    std::ofstream(dir / fmt::format("k{}.cu", i)) << cuda::gate_kernel_source(kernels[i]);
    driver << fmt::format("namespace k{} {{\n#include \"k{}.cu\"\n}}\n", i, i);
  }
  driver << kCheck;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const KernelDesc& d = kernels[i];
    static_assert(std::is_trivially_copyable_v<KernelDesc>);
    unsigned char bytes[sizeof(KernelDesc)];
    std::memcpy(bytes, &d, sizeof d);
    driver << fmt::format("  {{ static const unsigned char d[] = {{{}}};  // {}\n"
                          "    failures += check<k{}::{}>(d, k{}::{}, {}); }}\n",
                          fmt::join(bytes, ", "), kernel_name(d), i,
                          d.pass == 0 ? "GateForwardArgs" : "GateBackwardArgs", i, kernel_name(d), i);
  }
  driver << "  return failures;\n}\n";
  std::ofstream(dir / "driver.cpp") << driver.str();
  build_and_run_on_host(compiler, dir, "generated math differs from the scalar twins");
  if (!HasFailure()) fs::remove_all(dir);
}

// What the generator refuses: features on cells they do not apply to, a gate clip that is no
// bound, a dy row stride under H. The feature kernels' sources say what they do.
TEST(CudaSource, FeatureDescriptors) {
  KernelDesc gru = cuda_desc(CellKind::gru, Pass::forward, false, 8, 8, 2, 8);
  gru.peephole = 1;
  EXPECT_THROW(cuda::gate_kernel_source(gru), Error);
  gru.peephole = 0;
  gru.input_forget = 1;
  EXPECT_THROW(cuda::gate_kernel_source(gru), Error);
  gru.input_forget = 0;
  for (float bad : {-0.5f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    gru.gate_clip_bits = std::bit_cast<std::uint32_t>(bad);
    EXPECT_THROW(cuda::gate_kernel_source(gru), Error) << bad;
  }
  gru.gate_clip_bits = std::bit_cast<std::uint32_t>(0.7f);
  const std::string clipped = cuda::gate_kernel_source(gru);
  EXPECT_NE(clipped.find("rnnjit_gate_clip_bounds(rnnjit_opaque("), std::string::npos);
  gru.gate_clip_bits = 0;
  EXPECT_NE(cuda::gate_kernel_source(gru).find("no gate clip"), std::string::npos);
  KernelDesc lstm = cuda_desc(CellKind::lstm, Pass::backward, false, 8, 8, 2, 8);
  lstm.peephole = 1;
  lstm.input_forget = 1;
  const std::string both = cuda::gate_kernel_source(lstm);
  EXPECT_NE(both.find("a.peephole[2 * H + j]"), std::string::npos);
  EXPECT_NE(both.find("CLIP, gc, peep, true, g)"), std::string::npos);
  EXPECT_NE(kernel_name(lstm).find("_peep_cifg"), std::string::npos) << kernel_name(lstm);
  // dy with a row stride of its own (summed directions), never under H.
  KernelDesc summed = cuda_desc(CellKind::rnn_tanh, Pass::backward, false, 8, 8, 2, 16);
  summed.dy_row_stride = 8;
  EXPECT_NE(cuda::gate_kernel_source(summed).find("a.dy[row * 8 + j]"), std::string::npos);
  summed.dy_row_stride = 0;
  EXPECT_NE(cuda::gate_kernel_source(summed).find("a.dy[row * 16 + j]"), std::string::npos);
  summed.dy_row_stride = 7;
  EXPECT_THROW(cuda::gate_kernel_source(summed), Error);
}

// The reset-before GRU: two kernels per pass, told apart by their part (names, sources); part 1
// of backward starts from d(r * h_prev), not from dy; only this cell has a part 1.
TEST(CudaSource, ResetBeforeGruPartsAreDistinctKernels) {
  std::set<std::string> names;
  for (Pass pass : {Pass::forward, Pass::backward})
    for (bool training : {false, true}) {
      if (pass == Pass::backward && training) continue;
      for (int part : {0, 1}) {
        KernelDesc d = cuda_desc(CellKind::gru_reset_before, pass, training, 17, 17, 3, 34);
        d.part = static_cast<std::uint8_t>(part);
        const std::string name = kernel_name(d), src = cuda::gate_kernel_source(d);
        EXPECT_TRUE(names.insert(name).second) << name;
        EXPECT_NE(name.find(part ? "_n_cuda" : "_rz_cuda"), std::string::npos) << name;
        EXPECT_NE(src.find("void __launch_bounds__(128) " + name + "("), std::string::npos) << name;
        const char* math = pass == Pass::forward ? (part ? "rnnjit_gru_rb_update(" : "rnnjit_gru_rb_reset(")
                                                 : (part ? "rnnjit_gru_rb_backward_reset(" : "rnnjit_gru_rb_backward_update(");
        EXPECT_NE(src.find(std::string("= ") + math), std::string::npos) << name;
        if (pass == Pass::backward) {
          EXPECT_EQ(src.find("a.dy[") != std::string::npos, part == 0) << name;
          EXPECT_EQ(src.find("a.d_reset_h[row * H + j]") != std::string::npos, part == 1) << name;
        }
        // Training stores r, z (part 0) or n (part 1) into the reserve; inference stores nothing.
        EXPECT_EQ(src.find("a.gates[row * R") != std::string::npos, pass == Pass::backward || training) << name;
      }
    }
  EXPECT_EQ(names.size(), 6u);
  KernelDesc gru = cuda_desc(CellKind::gru, Pass::forward, false, 8, 8, 2, 8);
  gru.part = 1;
  EXPECT_THROW(cuda::gate_kernel_source(gru), Error);
  KernelDesc rb = cuda_desc(CellKind::gru_reset_before, Pass::backward, false, 8, 8, 2, 8);
  rb.part = 2;
  EXPECT_THROW(cuda::gate_kernel_source(rb), Error);
}

// The persistent kernel's source run on the host: every CUDA thread a host thread (std::barrier
// for __syncthreads and for a warp's shuffles, std::atomic_ref for the grid barrier's counter),
// each block's shared memory a vector. Two textual edits, both required to match: the extern
// shared array becomes the block's vector, and the grid barrier's spin yields the core.
constexpr const char* kPersistentShim = R"(#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>
#include "codegen/kernel_args.hpp"
#include "kernels/gate_reference.hpp"
#define __host__
#define __device__
#define __global__
#define __launch_bounds__(...)
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <class T> T __ldcg(const T* p) { return *p; }
struct ShimWarp {
  std::barrier<> sync{32};
  float value[32];
};
struct ShimBlock {
  ShimBlock(unsigned threads, std::size_t floats) : sync(threads), warps(threads / 32), shared(floats) {}
  std::barrier<> sync;
  std::vector<ShimWarp> warps;
  std::vector<float> shared;
};
static thread_local Dim3 blockIdx, threadIdx;
static Dim3 blockDim, gridDim;
static thread_local ShimBlock* shim_block = nullptr;
inline void __syncthreads() { shim_block->sync.arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  ShimWarp& w = shim_block->warps[threadIdx.x / 32];
  const unsigned lane = threadIdx.x % 32;
  w.value[lane] = v;
  w.sync.arrive_and_wait();
  const float other = w.value[lane ^ static_cast<unsigned>(mask)];
  w.sync.arrive_and_wait();
  return other;
}
template <class Kernel, class Args>
void shim_launch(Kernel kernel, const Args& args, unsigned blocks, unsigned threads, std::size_t shared_floats) {
  blockDim.x = threads;
  gridDim.x = blocks;
  std::vector<std::unique_ptr<ShimBlock>> b;
  for (unsigned i = 0; i < blocks; ++i) b.push_back(std::make_unique<ShimBlock>(threads, shared_floats));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < blocks; ++i)
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, i, t] {
        blockIdx.x = i;
        threadIdx.x = t;
        shim_block = b[i].get();
        kernel(args);
      });
  for (std::thread& t : pool) t.join();
}
)";

// main()'s checker: random weights, inputs and initial state; T steps forward or reversed; the
// kernel on its grid against the step-by-step twin (gh = h_{t-1} W_hh^T in double, then the
// gate kernel's scalar twin), every h_t, c_t (in place in inference) and stored gate compared.
constexpr const char* kPersistentCheck = R"(
template <class Args, class Kernel>
int check(const unsigned char (&bytes)[sizeof(rnnjit::KernelDesc)], Kernel kernel, unsigned blocks, unsigned threads,
          std::size_t shared_floats, int T, bool reverse, int index) {
  rnnjit::KernelDesc d;
  std::memcpy(&d, bytes, sizeof d);
  std::mt19937 rng(index);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](std::size_t n) { std::vector<float> v(n); for (float& e : v) e = u(rng); return v; };
  const long long N = d.rows, H = d.hidden, GH = d.gates() * H, LDH = d.ld_h, GX = d.gx_stride(),
                  R = d.reserve_gates() * H, ldw = H + 1;
  const std::vector<float> w = random(GH * ldw), gx = random(T * N * GX), bias_ih = random(GH), bias_hh = random(GH),
                           peep = random(3 * H), h_init = random(N * LDH), c_init = random(N * H);
  const long long c_t = d.training ? N * H : 0, gates_t = d.training ? N * R : 0;
  std::vector<float> h[2], c[2], gates[2];
  for (int k = 0; k < 2; ++k) {
    h[k] = std::vector<float>(T * N * LDH, 7.0f);  // the columns past H stay 7
    c[k] = std::vector<float>(d.training ? T * N * H : N * H, 7.0f);
    gates[k] = std::vector<float>(d.training ? T * N * R : 1, 7.0f);
  }
  const bool lstm = d.cell_kind() == rnnjit::CellKind::lstm;
  unsigned arrived = 0;
  rnnjit::PersistentForwardArgs p{w.data(), ldw, gx.data(), N * GX, bias_ih.data(), bias_hh.data(),
                                  d.peephole ? peep.data() : nullptr, h_init.data(), lstm ? c_init.data() : nullptr,
                                  h[0].data(), N * LDH, lstm ? c[0].data() : nullptr, c_t,
                                  d.training ? gates[0].data() : nullptr, gates_t, &arrived, T, reverse ? 1 : 0};
  Args args;
  static_assert(sizeof args == sizeof p);
  std::memcpy(&args, &p, sizeof p);
  shim_launch(kernel, args, blocks, threads, shared_floats);
  std::vector<float> gh(N * GH);
  for (int s = 0; s < T; ++s) {
    const long long t = reverse ? T - 1 - s : s, prev = reverse ? t + 1 : t - 1;
    const float* h_prev = s == 0 ? h_init.data() : h[1].data() + prev * N * LDH;
    for (long long n = 0; n < N; ++n)
      for (long long col = 0; col < GH; ++col) {
        double sum = 0.0;
        for (long long k = 0; k < H; ++k) sum += static_cast<double>(h_prev[n * LDH + k]) * w[col * ldw + k];
        gh[n * GH + col] = static_cast<float>(sum);
      }
    const rnnjit::GateForwardArgs a{gx.data() + t * N * GX, gh.data(), bias_ih.data(), bias_hh.data(), h_prev,
                                    lstm ? (s == 0 ? c_init.data() : c[1].data() + prev * c_t) : nullptr,
                                    h[1].data() + t * N * LDH, lstm ? c[1].data() + t * c_t : nullptr,
                                    d.training ? gates[1].data() + t * gates_t : nullptr,
                                    d.peephole ? peep.data() : nullptr};
    rnnjit::gate_forward_reference(d, a);
  }
  double worst = 0;
  for (auto* v : {h, c, gates})
    for (std::size_t i = 0; i < v[0].size(); ++i) {
      const double e = std::fabs(v[0][i] - v[1][i]) / (1.0 + std::fabs(v[1][i]));
      if (std::isnan(e) || e > worst) worst = e;
    }
  std::printf("kernel %d worst %.3g\n", index, worst);
  return worst <= 2e-5 ? 0 : 1;
}
int main() {
  int failures = 0;
)";

// Every forward cell and the features (cell clip, gate clip, peepholes, coupled gates, leaky
// slope, ONNX's activations), H with tails (5: scalar loads of h_{t-1}; 8: float4 ones), one row, and rows in two
// chunks (the second short of a group), forward and reversed, inference (c in place) and
// training (gates stored), two warps a block and a last block with fewer units: the generated
// persistent kernel, run on the host, matches the step-by-step twin. (Each CUDA thread is a host
// thread: a few kernels keep it to seconds.)
TEST(CudaPersistent, GeneratedKernelMatchesTheStepByStepTwinOnTheHost) {
  const std::string compiler = host_compiler();
  if (compiler.empty()) GTEST_SKIP() << "no host C++ compiler";
  const fs::path dir = fs::temp_directory_path() / fmt::format("rnnjit_cuda_persistent_host_{}", ::getpid());
  fs::create_directories(dir);
  struct Case {
    KernelDesc d;
    cuda::PersistentShape shape;
    bool reverse;
  };
  std::vector<Case> cases;
  // cell, H, N, training, reverse, features
  auto add = [&](CellKind cell, std::uint32_t H, std::uint32_t N, bool training, bool reverse, const Features& f) {
    KernelDesc d = cuda_desc(cell, Pass::forward, training, H, H, N, 2 * H);
    d.clip_bits = std::bit_cast<std::uint32_t>(f.clip);
    d.gate_clip_bits = std::bit_cast<std::uint32_t>(f.gate_clip);
    d.peephole = f.peephole;
    d.input_forget = f.input_forget;
    d.relu_alpha_bits = std::bit_cast<std::uint32_t>(f.relu_alpha);
    cuda::PersistentShape s;
    s.units = 3;
    s.blocks = static_cast<int>((H + 2) / 3);
    s.group_rows = std::min<int>(static_cast<int>(N), 4);
    s.chunk_rows = s.group_rows;  // N = 6: chunks of 4 and 2 rows
    s.threads = 64;
    s.shared_bytes = (static_cast<std::size_t>(d.gates()) * s.units + s.chunk_rows) * H * sizeof(float);
    cases.push_back({d, s, reverse});
  };
  add(CellKind::rnn_tanh, 5, 1, false, false, {});
  add(CellKind::rnn_sigmoid, 8, 6, true, true, {});
  add(CellKind::rnn_relu, 5, 6, true, true, {.gate_clip = 0.7f, .relu_alpha = 0.3f});
  add(CellKind::lstm, 8, 6, false, true, {});
  add(CellKind::lstm, 5, 6, true, false, {.clip = 0.375f, .gate_clip = 0.7f, .peephole = true, .input_forget = true});
  add(CellKind::lstm, 8, 1, true, true, {.peephole = true});
  add(CellKind::gru, 5, 6, false, true, {.gate_clip = 0.7f});
  add(CellKind::gru, 8, 6, true, false, {});
  // ONNX's activations (inference): an LSTM with a function in each role and peepholes, and a GRU.
  add(CellKind::lstm, 8, 6, false, true, {.gate_clip = 0.7f, .peephole = true});
  cases.back().d.activation[0] = static_cast<std::uint8_t>(Activation::hard_sigmoid);
  cases.back().d.activation_alpha_bits[0] = std::bit_cast<std::uint32_t>(0.3f);
  cases.back().d.activation_beta_bits[0] = std::bit_cast<std::uint32_t>(0.45f);
  cases.back().d.activation[1] = static_cast<std::uint8_t>(Activation::softsign);
  cases.back().d.activation[2] = static_cast<std::uint8_t>(Activation::elu);
  cases.back().d.activation_alpha_bits[2] = std::bit_cast<std::uint32_t>(0.8f);
  add(CellKind::gru, 5, 6, false, false, {});
  cases.back().d.activation[0] = static_cast<std::uint8_t>(Activation::sigmoid);
  cases.back().d.activation[1] = static_cast<std::uint8_t>(Activation::softplus);
  std::ostringstream driver;
  driver << kPersistentShim;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string source = cuda::persistent_kernel_source(cases[i].d, cases[i].shape);
    auto edit = [&](const std::string& from, const std::string& to) {
      const std::size_t at = source.find(from);
      ASSERT_NE(at, std::string::npos) << "the shim's edit no longer matches: " << from;
      source.replace(at, from.size(), to);
    };
    edit("extern __shared__ float shared[];", "float* const shared = shim_block->shared.data();");
    edit("< everyone) {", "< everyone) { std::this_thread::yield();");
    std::ofstream(dir / fmt::format("p{}.cu", i)) << source;
    driver << fmt::format("namespace p{} {{\n#include \"p{}.cu\"\n}}\n", i, i);
  }
  driver << kPersistentCheck;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    unsigned char bytes[sizeof(KernelDesc)];
    std::memcpy(bytes, &c.d, sizeof c.d);
    const std::string name = cuda::persistent_kernel_name(c.d, c.shape);
    driver << fmt::format("  {{ static const unsigned char d[] = {{{}}};  // {}\n"
                          "    failures += check<p{}::PersistentForwardArgs>(d, p{}::{}, {}, {}, {}, 3, {}, {}); }}\n",
                          fmt::join(bytes, ", "), name, i, i, name, c.shape.blocks, c.shape.threads,
                          c.shape.shared_bytes / sizeof(float), c.reverse, i);
  }
  driver << "  return failures;\n}\n";
  std::ofstream(dir / "driver.cpp") << driver.str();
  build_and_run_on_host(compiler, dir, "the persistent kernel differs from the step-by-step twin");
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace rnnjit
