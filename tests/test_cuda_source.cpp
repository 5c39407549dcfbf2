// The CUDA path without a GPU: every generated gate kernel (all cells, forward inference and
// training, backward; H with tails) compiles with NVRTC to PTX, and the generated source's math
// runs on the host — compiled by the system compiler behind a small shim that plays the CUDA
// grid — against the scalar twins (kernels/gate_reference.hpp).
#include <gtest/gtest.h>

#include <bit>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/planner.hpp"

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

std::vector<KernelDesc> every_kernel(std::uint32_t H) {
  std::vector<KernelDesc> out;
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru}) {
    out.push_back(cuda_desc(cell, Pass::forward, false, H, H, 3, 2 * H));
    out.push_back(cuda_desc(cell, Pass::forward, true, H, H, 3, 2 * H));
    out.push_back(cuda_desc(cell, Pass::backward, false, H, H, 3, 2 * H));
  }
  for (Pass pass : {Pass::forward, Pass::backward}) {  // the LSTM cell clip
    KernelDesc d = cuda_desc(CellKind::lstm, pass, pass == Pass::forward, H, H, 3, 2 * H);
    d.clip_bits = std::bit_cast<std::uint32_t>(0.375f);
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

TEST(CudaSource, GeneratedMathMatchesTheScalarTwinsOnTheHost) {
  const char* cxx = std::getenv("CXX");
  const std::string compiler = cxx && *cxx ? cxx : "c++";
  if (std::system((compiler + " --version >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no host C++ compiler";
  const fs::path dir = fs::temp_directory_path() / fmt::format("rnnjit_cuda_host_{}", ::getpid());
  fs::create_directories(dir);
  std::ostringstream driver;
  driver << kShim;
  const std::vector<KernelDesc> kernels = every_kernel(17);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    std::ofstream(dir / fmt::format("k{}.cu", i)) << cuda::gate_kernel_source(kernels[i]);
    driver << fmt::format("namespace k{} {{\n#include \"k{}.cu\"\n}}\n", i, i);
  }
  // main(): for each kernel, random arguments, the grid loop, the twin, and the worst error.
  driver << R"(
template <class Args, class Kernel>
int check(const rnnjit::KernelDesc& d, Kernel kernel, int index) {
  std::mt19937 rng(index);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int n = 3 * 4 * 2 * 17 * 4;
  std::vector<float> in[6], out_a[4], out_b[4];
  for (auto& v : in) { v.resize(n); for (float& e : v) e = u(rng); }
  for (int k = 0; k < 4; ++k) { out_a[k].resize(n); for (float& e : out_a[k]) e = u(rng); out_b[k] = out_a[k]; }
  Args a{}, b{};
  if constexpr (sizeof(Args) == sizeof(rnnjit::GateForwardArgs)) {
    a = b = Args{in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(), in[5].data(), nullptr, nullptr, nullptr};
    a.h_out = out_a[0].data(); a.c_out = out_a[1].data(); a.gates = out_a[2].data();
    b.h_out = out_b[0].data(); b.c_out = out_b[1].data(); b.gates = out_b[2].data();
  } else {
    a = b = Args{in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(), nullptr, nullptr, nullptr};
    a.gates = out_a[0].data(); a.dh_carry = out_a[1].data(); a.dc_carry = out_a[2].data();
    b.gates = out_b[0].data(); b.dh_carry = out_b[1].data(); b.dc_carry = out_b[2].data();
  }
  blockDim.x = 128;
  for (blockIdx.y = 0; blockIdx.y < d.rows; ++blockIdx.y)
    for (blockIdx.x = 0; blockIdx.x * 128 < d.cols; ++blockIdx.x)
      for (threadIdx.x = 0; threadIdx.x < 128; ++threadIdx.x) kernel(a);
  if (d.pass == 0) rnnjit::gate_forward_reference(d, *reinterpret_cast<rnnjit::GateForwardArgs*>(&b));
  else rnnjit::gate_backward_reference(d, *reinterpret_cast<rnnjit::GateBackwardArgs*>(&b));
  double worst = 0;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(out_a[k][i] - out_b[k][i]) / (1.0 + std::fabs(out_b[k][i])));
  std::printf("kernel %d worst %.3g\n", index, worst);
  return worst <= 1e-6 ? 0 : 1;
}
int main() {
  int failures = 0;
)";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const KernelDesc& d = kernels[i];
    driver << fmt::format(
        "  {{ rnnjit::KernelDesc d; d.kind = 0; d.isa = 3; d.cell = {}; d.pass = {}; d.training = {}; d.hidden = 17; "
        "d.cols = 17; d.rows = 3; d.ld_h = 34; d.unroll = 1; d.clip_bits = {}u;\n"
        "    failures += check<k{}::{}>(d, k{}::{}, {}); }}\n",
        d.cell, d.pass, d.training, d.clip_bits, i, d.pass == 0 ? "GateForwardArgs" : "GateBackwardArgs", i, kernel_name(d), i);
  }
  driver << "  return failures;\n}\n";
  std::ofstream(dir / "driver.cpp") << driver.str();
  const std::string src = RNNJIT_SOURCE_DIR;
  const std::string build = fmt::format(
      "cd '{}' && {} -std=c++20 -O1 -w -I'{}' -I'{}/runtime/include' driver.cpp '{}/kernels/gate_reference.cpp' "
      "'{}/codegen/kernel_desc.cpp' '{}/runtime/config.cpp' '{}/runtime/names.cpp' -lfmt -o driver > build.log 2>&1",
      dir.string(), compiler, src, src, src, src, src, src);
  ASSERT_EQ(std::system(build.c_str()), 0) << "host build of the generated source failed; see " << dir / "build.log";
  EXPECT_EQ(std::system(fmt::format("'{}/driver' > '{}/run.log'", dir.string(), dir.string()).c_str()), 0)
      << "generated math differs from the scalar twins; see " << dir / "run.log";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rnnjit
