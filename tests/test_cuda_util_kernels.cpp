// The GPU executor's data-movement kernels (codegen/cuda/util_source.hpp) without a GPU: the
// generated source is compiled by the system compiler behind a shim that plays the CUDA grid
// (a small grid, so the grid-stride loops wrap), and each kernel is checked against plain host
// code - the dropout masks bit for bit against kernels/dropout.hpp, which the CPU executor and
// the reference use.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "codegen/cuda/util_source.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDriver = R"(#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>
#include "kernels/dropout.hpp"
#define __host__
#define __device__
#define __global__
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
namespace gpu {
#include "util.cu"
}
// Runs `kernel` over a grid of 3 blocks of 32 threads: far fewer threads than elements.
template <typename F> void grid(F kernel) {
  gridDim.x = 3; blockDim.x = 32;
  for (blockIdx.x = 0; blockIdx.x < gridDim.x; ++blockIdx.x)
    for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x) kernel();
}
int failures = 0;
void expect(bool ok, const char* what, long long i) {
  if (!ok && failures++ < 10) std::printf("mismatch in %s at %lld\n", what, i);
}
int main() {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](std::size_t n) { std::vector<float> v(n); for (float& e : v) e = u(rng); return v; };
  {  // copy: 3 blocks of 4 rows of 5 columns between padded layouts; a null source writes zeros;
     // a plus (laid out as src) is added in the same pass
    const std::vector<float> src = random(3 * 30), plus = random(3 * 30);
    std::vector<float> dst(3 * 25, 7.0f), zeros(3 * 25, 7.0f), sum(3 * 25, 7.0f);
    grid([&] { gpu::rnnjit_copy(src.data(), nullptr, dst.data(), 3, 4, 5, 7, 6, 30, 25); });
    grid([&] { gpu::rnnjit_copy(nullptr, nullptr, zeros.data(), 3, 4, 5, 7, 6, 30, 25); });
    grid([&] { gpu::rnnjit_copy(src.data(), plus.data(), sum.data(), 3, 4, 5, 7, 6, 30, 25); });
    for (int b = 0; b < 3; ++b) for (int r = 0; r < 4; ++r) for (int c = 0; c < 5; ++c) {
      const int at = b * 25 + r * 6 + c, from = b * 30 + r * 7 + c;
      expect(dst[at] == src[from], "copy", b * 100 + r * 10 + c);
      expect(zeros[at] == 0.0f, "copy zeros", b * 100 + r * 10 + c);
      expect(sum[at] == src[from] + plus[from], "copy plus", b * 100 + r * 10 + c);
    }
    expect(dst[5] == 7.0f && dst[24] == 7.0f, "copy padding", 0);
    expect(sum[5] == 7.0f && sum[24] == 7.0f, "copy plus padding", 0);
  }
  for (float beta : {0.0f, 1.0f})  // column sums in row order, as the CPU executor sums
    for (bool with_factor : {false, true}) {  // with a factor: the peephole gradients' sum of products
      const std::vector<float> src = random(1000 * 40), factor = random(1000 * 43);
      std::vector<float> dst = random(37), want = dst;
      for (int j = 0; j < 37; ++j) {
        want[j] = beta == 0.0f ? 0.0f : beta * want[j];
        for (int r = 0; r < 1000; ++r) want[j] += with_factor ? src[r * 40 + j] * factor[r * 43 + j] : src[r * 40 + j];
      }
      const float* f = with_factor ? factor.data() : nullptr;
      grid([&] { gpu::rnnjit_column_sum(src.data(), f, dst.data(), 1000, 37, 40, 43, beta); });
      for (int j = 0; j < 37; ++j) expect(dst[j] == want[j], with_factor ? "column sum with a factor" : "column sum", j);
    }
  {  // dropout: the same masks as kernels/dropout.hpp, element for element
    const long long n = 100003;
    const float p = 0.3f, scale = rnnjit::dropout_scale(p);
    const unsigned long long seed = 0x5eedull;
    const std::vector<float> src = random(n);
    std::vector<float> dst(n), back = random(n), back_want = back;
    std::vector<unsigned char> keep(n);
    grid([&] { gpu::rnnjit_dropout_forward(src.data(), dst.data(), keep.data(), n, 2, p, scale, seed); });
    long long kept = 0;
    for (long long e = 0; e < n; ++e) {
      const bool k = rnnjit::dropout_keep(seed, 2, e, p);
      kept += k;
      expect(keep[e] == k, "dropout mask", e);
      expect(dst[e] == (k ? src[e] * scale : 0.0f), "dropout forward", e);
      back_want[e] = k ? back_want[e] * scale : 0.0f;
    }
    expect(kept > n * 0.68 && kept < n * 0.72, "dropout rate", kept);
    grid([&] { gpu::rnnjit_dropout_backward(back.data(), keep.data(), n, scale); });
    for (long long e = 0; e < n; ++e) expect(back[e] == back_want[e], "dropout backward", e);
  }
  {  // dh_proj = dh_carry + dy over rows of different strides
    const std::vector<float> a = random(9 * 11), b = random(9 * 13);
    std::vector<float> dst(9 * 12, 7.0f);
    grid([&] { gpu::rnnjit_add_rows(a.data(), b.data(), dst.data(), 9, 10, 11, 13, 12); });
    for (int r = 0; r < 9; ++r) for (int j = 0; j < 10; ++j)
      expect(dst[r * 12 + j] == a[r * 11 + j] + b[r * 13 + j], "add rows", r * 100 + j);
  }
  {  // variable lengths: only rows past their end (t + k >= lengths[r]) are copied, or zeroed
     // without a source, over 4 steps of 5 rows of 9 columns with padded rows and steps
    const int lengths[5] = {1, 6, 3, 4, 2};
    const long long steps = 4, rows = 5, cols = 9, ld_src = 11, ld_dst = 10, ts_src = 60, ts_dst = 53, t0 = 2;
    const std::vector<float> src = random(steps * ts_src);
    std::vector<float> dst = random(steps * ts_dst), zeros = dst;
    const std::vector<float> before = dst;
    grid([&] { gpu::rnnjit_rows_past_end(lengths, t0, src.data(), dst.data(), steps, rows, cols, ld_src, ld_dst,
                                         ts_src, ts_dst); });
    grid([&] { gpu::rnnjit_rows_past_end(lengths, t0, nullptr, zeros.data(), steps, rows, cols, 0, ld_dst, 0, ts_dst); });
    int touched = 0;
    for (long long e = 0; e < steps * ts_dst; ++e) {
      const long long k = e / ts_dst, r = (e % ts_dst) / ld_dst, c = (e % ts_dst) % ld_dst;
      const bool in = r < rows && c < cols, past = in && t0 + k >= lengths[r];
      touched += past;
      expect(dst[e] == (past ? src[k * ts_src + r * ld_src + c] : before[e]), "rows past end", e);
      expect(zeros[e] == (past ? 0.0f : before[e]), "rows past end zeros", e);
    }
    expect(touched == (4 + 0 + 3 + 2 + 4) * 9, "rows past end count", touched);
    // One step (the per-step carries): row r past its end when t >= lengths[r].
    std::vector<float> one = before;
    grid([&] { gpu::rnnjit_rows_past_end(lengths, 3, src.data(), one.data(), 1, rows, cols, ld_src, ld_dst, 0, 0); });
    for (long long r = 0; r < rows; ++r)
      for (long long c = 0; c < cols; ++c)
        expect(one[r * ld_dst + c] == (3 >= lengths[r] ? src[r * ld_src + c] : before[r * ld_dst + c]), "one step", r);
  }
  std::printf("%d mismatches\n", failures);
  return failures == 0 ? 0 : 1;
}
)";

TEST(CudaUtilKernels, MatchHostCodeOnTheHost) {
  const char* cxx = std::getenv("CXX");
  const std::string compiler = cxx && *cxx ? cxx : "c++";
  if (std::system((compiler + " --version >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no host C++ compiler";
  const fs::path dir = fs::temp_directory_path() / fmt::format("rnnjit_cuda_util_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "util.cu") << cuda::util_kernels_source();
  std::ofstream(dir / "driver.cpp") << kDriver;
  const std::string build = fmt::format("cd '{}' && {} -std=c++20 -O1 -w -I'{}' driver.cpp -o driver > build.log 2>&1",
                                        dir.string(), compiler, RNNJIT_SOURCE_DIR);
  ASSERT_EQ(std::system(build.c_str()), 0) << "host build of the generated source failed; see " << dir / "build.log";
  EXPECT_EQ(std::system(fmt::format("'{}/driver' > '{}/run.log'", dir.string(), dir.string()).c_str()), 0)
      << "the data-movement kernels differ from host code; see " << dir / "run.log";
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(CudaUtilKernels, GridSizes) {
  EXPECT_EQ(cuda::util_blocks(0), 1u);
  EXPECT_EQ(cuda::util_blocks(1), 1u);
  EXPECT_EQ(cuda::util_blocks(cuda::kUtilBlockThreads + 1), 2u);
  EXPECT_EQ(cuda::util_blocks(std::int64_t{1} << 40), 8192u);  // the loops stride over the rest
}

}  // namespace
}  // namespace rnnjit
