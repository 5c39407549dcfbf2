// The int8 GEMMs of Quantize::int8_dynamic (AVX512-VNNI, AMX-INT8, AVX-VNNI and avx2), exactly: the generated
// vnni_gemm and amx_int8_gemm kernels against their scalar twin (kernels/int8_reference.hpp) tile by tile, and the planner's
// tiling with the executor's packing and per-row activation quantization against a loop over
// the same quantized operands (int8::quantize_matrix, int8::quantize_activation_row). The int32
// sums are exact and the dequantization is the same float operations in the same order, so C
// must be equal bit for bit. Tails in every dimension: M, N, K in {1, 2, 3, 15, 16, 17, 31, 33,
// 63, 64, 65, 127, 800}, column groups with tails, beta 0 and 1, 1 and 2 threads, a recurrence's
// per-thread tiles. Each unit's cases skip where the CPU (or OS) does not run it: the AMX ones
// did not run where this was written (AMD Zen 4), the AVX-512 and AVX-VNNI ones not where the
// AVX2 units were added (AMD Zen 3). Each unit quantizes activations with its own levels and
// zero point (codegen/int8_unit.hpp), and so does the loop it is checked against.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "codegen/planner.hpp"
#include "codegen/register_budgets.hpp"
#include "kernels/int8_reference.hpp"
#include "runtime/cache.hpp"
#include "runtime/executor.hpp"
#include "tests/guarded_buffer.hpp"
#include "tests/uniform.hpp"

namespace rnnjit {
namespace {

constexpr Int8Unit kUnits[] = {Int8Unit::avx512_vnni, Int8Unit::amx, Int8Unit::avx_vnni, Int8Unit::avx2};

bool runs(Int8Unit unit) { return int8_unit_usable(unit); }
#define SKIP_UNLESS_RUNS(unit) \
  if (!runs(unit)) GTEST_SKIP() << "this CPU (or OS) does not run " << to_string(unit)

// --- the kernel against its twin, one tile ---

struct TileCase {
  int rows, vectors, n_tail, beta, b_k_stride, k_tiles, lookahead;
};

class Int8Kernel : public testing::TestWithParam<Int8Unit> {};

TEST_P(Int8Kernel, MatchesItsScalarTwinExactly) {
  const Int8Unit unit = GetParam();
  SKIP_UNLESS_RUNS(unit);
  const bool amx = unit == Int8Unit::amx;
  const Isa isa = int8_kernel_isa(unit);
  std::vector<TileCase> cases;
  for (int vectors = 1; vectors <= (amx ? 2 : 4); ++vectors)
    for (int rows : {1, 2, 3, 4, 5, 6, 7, 13, 16, 17, 29, 32})
      for (int n_tail : {0, 1, 7, 8, 9, 15}) {
        if (amx ? rows > 32 : rows > int8_max_rows(vectors, isa)) continue;
        const int beta = (rows + n_tail) % 2, extra = rows % 3 == 0 ? 1 : 0;
        cases.push_back({rows, vectors, n_tail, beta, std::min(amx ? 2 : 8, vectors + extra), 1 + rows % 3,
                         rows % 2 ? 2 : 0});
      }
  std::mt19937 rng(5);
  for (const TileCase& t : cases) {
    KernelDesc d;
    d.kind = static_cast<std::uint8_t>(amx ? KernelKind::amx_int8_gemm : KernelKind::vnni_gemm);
    d.a_lookahead = static_cast<std::uint8_t>(amx && t.rows % 3 == 1 ? 2 : 0);
    d.isa = static_cast<std::uint8_t>(isa);
    if (!amx) d.int8_unit = static_cast<std::uint8_t>(unit);
    d.rows = static_cast<std::uint32_t>(t.rows);
    d.vectors = static_cast<std::uint8_t>(t.vectors);
    d.n_tail = static_cast<std::uint8_t>(t.n_tail);
    d.beta = static_cast<std::uint8_t>(t.beta);
    d.b_k_stride = static_cast<std::uint32_t>(t.b_k_stride);
    d.b_lookahead = static_cast<std::uint32_t>(t.lookahead);
    const std::int64_t k = t.k_tiles * kInt8TileK - (t.rows % 2 ? 5 : 0);  // a K tail in most cases
    d.a_row_stride = static_cast<std::uint32_t>(int8_k(k) + 64);
    const std::int64_t ldc = 16 * t.vectors + 3;
    d.c_row_stride = static_cast<std::uint32_t>(ldc);
    // Extreme operands: uint8 0..255 (0..127 on the avx2 unit, whose 7-bit activations are stored
    // 1..127) against int8 -127..127, so the int32 (and avx2's int16 pair) sums reach their widest.
    const ActivationQuantization aq = activation_quantization(unit);
    std::uniform_int_distribution<int> u8(0, aq.max_stored());
    // A's last row ends at its last k tile (the stride's extra 64 bytes lie between rows only).
    std::vector<std::uint8_t> a(static_cast<std::size_t>((t.rows - 1) * d.a_row_stride + int8_k(k)));
    for (auto& v : a) v = static_cast<std::uint8_t>(u8(rng));
    const std::int64_t width = 16 * t.vectors - (t.n_tail ? 16 - t.n_tail : 0);
    const std::vector<float> w = test::uniform(width * k, static_cast<unsigned>(t.rows * 10 + t.vectors));
    std::vector<std::int8_t> panel(static_cast<std::size_t>(int8_panel_bytes(t.b_k_stride, k)));
    int8::pack_panel(panel.data(), w.data(), k, k, width, t.b_k_stride, aq.zero_point);
    const std::vector<float> a_scale = test::uniform(t.rows, 9);
    // C ends where its last row's last column does: the columns past a tail are never touched.
    const std::int64_t c_size = (t.rows - 1) * ldc + width;
    std::vector<float> c0 = test::uniform(c_size, 11), c_ref = c0;
    // The generated kernel's operands end against an inaccessible page, its inputs read-only: a
    // read or write past them faults.
    test::GuardedBuffer ga(a.size() / 4), gb(panel.size() / 4), gs(a_scale.size()), gc(c0.size());
    std::memcpy(ga.data(), a.data(), a.size());
    std::memcpy(gb.data(), panel.data(), panel.size());
    gs.assign(a_scale);
    gc.assign(c0);
    ga.read_only();
    gb.read_only();
    gs.read_only();
    const CompiledKernel& kernel = *Cache::instance().kernel(d);
    Int8GemmArgs args{reinterpret_cast<const std::uint8_t*>(ga.data()), reinterpret_cast<const std::int8_t*>(gb.data()),
                      gc.data(), int8_k(k) / kInt8TileK, gs.data(), 0};
    kernel(&args);
    Int8GemmArgs ref{a.data(), panel.data(), c_ref.data(), int8_k(k) / kInt8TileK, a_scale.data(), 0};
    int8::vnni_gemm_reference(d, ref);
    for (std::size_t i = 0; i < c0.size(); ++i) ASSERT_EQ(gc.data()[i], c_ref[i]) << kernel_name(d) << " at " << i;
  }
}

// The AMX-INT8 kernels are generated (never run) on any CPU: every tile shape the planner can ask
// for encodes, with TDPBUSD, and an impossible one is refused.
TEST(AmxInt8Kernel, EveryTileShapeIsGenerated) {
  for (int rows : {1, 15, 16, 17, 32})
    for (int vectors : {1, 2})
      for (int n_tail : {0, 5}) {
        KernelDesc d;
        d.kind = static_cast<std::uint8_t>(KernelKind::amx_int8_gemm);
        d.isa = static_cast<std::uint8_t>(Isa::avx512);
        d.rows = static_cast<std::uint32_t>(rows);
        d.vectors = static_cast<std::uint8_t>(vectors);
        d.n_tail = static_cast<std::uint8_t>(n_tail);
        d.beta = static_cast<std::uint8_t>(rows % 2);
        d.b_k_stride = 2;
        d.b_lookahead = 4;
        d.a_lookahead = 2;
        d.a_row_stride = 832;
        d.c_row_stride = 3200;
        const std::shared_ptr<const CompiledKernel> k = Cache::instance().kernel(d);
        EXPECT_NE(k->disassembly().find("tdpbusd"), std::string::npos) << kernel_name(d);
      }
  KernelDesc bad;
  bad.kind = static_cast<std::uint8_t>(KernelKind::amx_int8_gemm);
  bad.isa = static_cast<std::uint8_t>(Isa::avx512);
  bad.rows = 33;
  bad.vectors = 1;
  bad.b_k_stride = 1;
  bad.a_row_stride = 64;
  bad.c_row_stride = 16;
  EXPECT_THROW(Cache::instance().kernel(bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Units, Int8Kernel, testing::ValuesIn(kUnits),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// --- the planner's tiling and the executor's loops ---

struct Int8Case {
  std::int64_t m, n, k;
  float beta;
  int threads;
  std::int64_t groups;
  bool recurrent = false;
  Int8Unit unit = Int8Unit::avx512_vnni;
};

// C = A W^T (+ beta C) through a one-stage plan: W [n, k] packed as int8 panels, A [m, lda].
std::vector<float> run(const Int8Case& c, const std::vector<float>& a, std::int64_t lda, const std::vector<float>& w,
                       std::vector<float> out, std::int64_t ldc) {
  Plan plan;
  plan.threads = c.threads;
  GemmStep g{.what = "test", .trans_a = false, .trans_b = true, .m = c.m, .n = c.n, .k = c.k,
             .a = {Buffer::x, -1, 0}, .b = {Buffer::weights, -1, 0}, .c = {Buffer::y, -1, 0}, .lda = lda, .ldb = c.k,
             .ldc = ldc, .beta = c.beta};
  g.blocking.packed_b = true;
  g.blocking.int8 = true;
  g.blocking.int8_unit = c.unit;
  g = plan_generated_gemm(g, c.n / c.groups, c.threads, plan.kernels, c.recurrent);
  EXPECT_TRUE(g.blocking.int8);
  const KernelKind kind = c.unit == Int8Unit::amx ? KernelKind::amx_int8_gemm : KernelKind::vnni_gemm;
  for (const KernelDesc& d : plan.kernels) {
    EXPECT_EQ(d.kind_of(), kind) << kernel_name(d);
    EXPECT_EQ(d.isa_kind(), int8_kernel_isa(c.unit)) << kernel_name(d);
    if (kind == KernelKind::vnni_gemm) EXPECT_EQ(d.int8_unit, static_cast<std::uint8_t>(c.unit)) << kernel_name(d);
  }
  std::vector<float> a_panels(static_cast<std::size_t>(a_panel_elements(g.blocking, c.m, c.k)));
  g.a_panels = {Buffer::workspace, plan.workspace.add("a_panels", Space::workspace, a_panels.size() * sizeof(float)), 0};
  std::vector<float> packed(static_cast<std::size_t>(packed_elements(g.blocking, c.groups, c.k)));
  const int region = plan.workspace.add("packed", Space::packed, packed.size() * sizeof(float));
  plan.pack_weights.push_back(Stage{{{PackStep{.what = "pack", .src = {Buffer::weights, -1, 0},
                                               .dst = {Buffer::packed, region, 0}, .k = c.k, .groups = c.groups,
                                               .blocking = g.blocking}}}});
  g.b = {Buffer::packed, region, 0};
  plan.forward.push_back(Stage{{{g}}});
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  for (const KernelDesc& d : plan.kernels) kernels.push_back(Cache::instance().kernel(d));
  auto shared = std::make_shared<const Plan>(plan);
  Executor ex(shared, kernels);
  Bindings bind;
  bind.workspace = reinterpret_cast<std::byte*>(a_panels.data());
  bind.packed = reinterpret_cast<std::byte*>(packed.data());
  bind.bind(Buffer::x, a.data());
  bind.bind(Buffer::weights, w.data());
  bind.bind(Buffer::y, out.data());
  ex.run(shared->pack_weights, bind);
  ex.run(shared->forward, bind);
  return out;
}

// What the int8 GEMM computes for row i, column j: the quantized operands' integer dot product,
// dequantized as the kernel does, then + C with beta.
void check(const Int8Case& c, std::vector<float> a = {}) {
  SKIP_UNLESS_RUNS(c.unit);
  const std::int64_t lda = c.k + 3, ldc = c.n + 1;
  if (a.empty()) a = test::uniform(c.m * lda, 1);
  const std::vector<float> w = test::uniform(c.n * c.k, 2);
  const std::vector<float> c0 = test::uniform(c.m * ldc, 4);
  const std::vector<float> out = run(c, a, lda, w, c0, ldc);
  const int8::QuantizedMatrix qw = int8::quantize_matrix(w.data(), c.n, c.k);
  std::vector<std::uint8_t> qa(static_cast<std::size_t>(int8_k(c.k)));
  const ActivationQuantization aq = activation_quantization(c.unit);
  for (std::int64_t i = 0; i < c.m; ++i) {
    const float scale = int8::quantize_activation_row(a.data() + i * lda, c.k, int8_k(c.k), qa.data(), aq);
    for (std::int64_t j = 0; j < ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i * ldc + j);
      if (j >= c.n) {
        ASSERT_EQ(out[at], c0[at]) << "wrote padding at " << i << "," << j;
        continue;
      }
      std::int32_t sum = 0;
      for (std::int64_t kk = 0; kk < c.k; ++kk)
        sum += (std::int32_t{qa[static_cast<std::size_t>(kk)]} - aq.zero_point) *
               qw.q[static_cast<std::size_t>(j * c.k + kk)];
      const float v = static_cast<float>(sum) * qw.scale[static_cast<std::size_t>(j)] * scale;
      ASSERT_EQ(out[at], c.beta != 0.0f ? c0[at] + v : v) << "C[" << i << "," << j << "]";
    }
  }
}

class Int8Gemm : public testing::TestWithParam<Int8Case> {};
TEST_P(Int8Gemm, EqualsTheLoopOverQuantizedOperands) { check(GetParam()); }

std::vector<Int8Case> sweep() {
  const std::int64_t sizes[] = {1, 2, 3, 15, 16, 17, 31, 33, 63, 64, 65, 127, 800};
  std::vector<Int8Case> out;
  int i = 0;
  for (std::int64_t m : sizes)
    for (std::int64_t n : sizes)
      for (std::int64_t k : sizes) {
        if (m * n * k > 800 * 65 * 65) continue;  // keep the loop quick
        const float beta = i % 2 ? 1.0f : 0.0f;
        const int threads = 1 + (i / 2) % 2;
        const bool recurrent = i % 5 == 0;
        ++i;
        if (i % 3) continue;  // a third of the product, still covering each size in each role
        out.push_back({m, n, k, beta, threads, 1, recurrent});
      }
  out.push_back({20, 3200, 800, 0.0f, 2, 4});        // the DS2 input projection's columns, 20 rows
  out.push_back({300, 3200, 800, 0.0f, 2, 4});       // several m blocks
  out.push_back({45, 150, 70, 1.0f, 2, 3});          // groups of 50: a column tail in every group
  out.push_back({20, 3200, 800, 0.0f, 2, 4, true});  // the DS2 recurrent step
  out.push_back({1, 4 * 640, 640, 0.0f, 2, 4, true});  // a decoder step, N = 1
  out.push_back({1, 4 * 115, 33, 0.0f, 2, 4, true});
  out.push_back({40, 3 * 50, 70, 1.0f, 1, 3, true});
  out.push_back({7, 1024, 1025, 0.0f, 2, 1, true});
  const std::size_t per_unit = out.size();
  for (Int8Unit unit : {Int8Unit::amx, Int8Unit::avx_vnni, Int8Unit::avx2})
    for (std::size_t i = 0; i < per_unit; ++i) {
      out.push_back(out[i]);
      out.back().unit = unit;
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, Int8Gemm, testing::ValuesIn(sweep()), [](const auto& info) {
  const Int8Case& c = info.param;
  return fmt::format("{}_m{}_n{}_k{}_beta{}_th{}_g{}{}", to_string(c.unit), c.m, c.n, c.k, static_cast<int>(c.beta),
                     c.threads, c.groups, c.recurrent ? "_step" : "");
});

// The executor's quantizers (AVX-512 and AVX2) round ties to even, clamp, and give a row of
// zeros scale 0 (so C is 0), as int8::quantize does: with max|row| = 127, q = round(x) on 8-bit
// activations; the avx2 unit's 7 bits (q = round(x * 63 / 127)) meet ties at other values.
TEST(Int8Quantization, RoundsTiesToEvenAndHandlesZeroRows) {
  const std::vector<float> row = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.0f, 126.5f, -127.0f};
  EXPECT_EQ(int8::quantize(0.5f, 1.0f), 0);
  EXPECT_EQ(int8::quantize(1.5f, 1.0f), 2);
  EXPECT_EQ(int8::quantize(-2.5f, 1.0f), -2);
  EXPECT_EQ(int8::quantize(126.5f, 1.0f), 126);
  EXPECT_EQ(int8::quantize(300.0f, 1.0f), 127);
  EXPECT_EQ(int8::quantize(std::nanf(""), 1.0f), -127);
  EXPECT_EQ(int8::quantize(300.0f, 1.0f, 63), 63);
  EXPECT_EQ(int8::quantize(-62.5f, 1.0f, 63), -62);
  EXPECT_EQ(int8::quantize(std::nanf(""), 1.0f, 63), -63);
  const std::int64_t k = static_cast<std::int64_t>(row.size());
  std::vector<float> a(static_cast<std::size_t>(2 * (k + 3)), 0.0f);
  std::copy(row.begin(), row.end(), a.begin());  // row 0; row 1 all zeros
  // With 63 levels and max|row| = 63 * 2 = 126, q = round(x / 2): ties at odd x.
  const std::vector<float> row7 = {126.0f, 1.0f, 3.0f, 5.0f, -1.0f, -3.0f, -5.0f, 0.0f, 125.0f, -126.0f};
  std::vector<float> a7(a.size(), 0.0f);
  std::copy(row7.begin(), row7.end(), a7.begin());
  int ran = 0;
  for (Int8Unit unit : kUnits) {
    if (!runs(unit)) continue;
    for (const std::vector<float>* rows : {&a, &a7}) {
      check({2, 17, k, 0.0f, 1, 1, false, unit}, *rows);
      check({2, 17, k, 1.0f, 2, 1, true, unit}, *rows);
    }
    ++ran;
  }
  if (!ran) GTEST_SKIP() << "this CPU runs no int8 unit";
}

// Weights that were quantized per row and dequantized (w' = q * scale: what a saved int8 model,
// or ONNX Runtime's per-channel symmetric int8 weights, hand back as FP32) quantize to the same
// q again: each row's largest |q| is 127, so its scale comes back within a rounding, and q *
// (1 +- a few ulps) rounds to q. So int8 weights travel as FP32 through the FP32 API unchanged.
TEST(Int8Quantization, DequantizedWeightsQuantizeToTheSameIntegers) {
  const std::int64_t rows = 64, cols = 333;
  std::vector<float> w = test::uniform(rows * cols, 21);
  for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(5 * cols + c)] *= 1e-20f;  // tiny values
  for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(6 * cols + c)] *= 3e20f;   // huge ones
  const int8::QuantizedMatrix q = int8::quantize_matrix(w.data(), rows, cols);
  std::vector<float> dequantized(w.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t at = static_cast<std::size_t>(r * cols + c);
      dequantized[at] = static_cast<float>(q.q[at]) * q.scale[static_cast<std::size_t>(r)];
    }
  const int8::QuantizedMatrix again = int8::quantize_matrix(dequantized.data(), rows, cols);
  EXPECT_EQ(again.q, q.q);
  for (std::int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(again.scale[static_cast<std::size_t>(r)], q.scale[static_cast<std::size_t>(r)],
                2e-7 * q.scale[static_cast<std::size_t>(r)]);
}

// Blocking: the AVX512_BF16 tiles (the same registers) on AVX-512, ymm tiles within 16 registers
// on the AVX2 units, K padded to tiles of 64.
TEST(Int8Blocking, TilesFitTheRegistersAndPadK) {
  const CacheSizes caches;
  for (std::int64_t m : {1, 20, 40, 6000})
    for (bool shared : {false, true}) {
      const GemmBlocking b = choose_int8_blocking(m, 800, 800, 2, caches, shared);
      EXPECT_TRUE(b.int8 && !b.bf16 && b.packed_b && b.pack_a);
      EXPECT_LE(b.m_r * b.n_r + b.n_r + 2, 32) << m;
      EXPECT_EQ(b.k_c, 832);
      EXPECT_EQ(b.a_copies, shared ? 1 : 2);
      const GemmBlocking amx = choose_int8_blocking(m, 800, 800, 2, caches, shared, Int8Unit::amx);
      EXPECT_TRUE(amx.int8 && amx.int8_unit == Int8Unit::amx);
      EXPECT_LE(amx.m_r, 32);
      EXPECT_LE(amx.n_r, 2);
      for (Int8Unit unit : {Int8Unit::avx_vnni, Int8Unit::avx2}) {
        const GemmBlocking y = choose_int8_blocking(m, 800, 800, 2, caches, shared, unit);
        EXPECT_TRUE(y.int8 && y.int8_unit == unit);
        EXPECT_GE(y.m_r, 1);
        EXPECT_LE(y.m_r, int8_max_rows(static_cast<int>(y.n_r), Isa::avx2)) << m;
        EXPECT_LE(2 * y.m_r * y.n_r + 2 * y.n_r + 3, 16) << m;
        EXPECT_EQ(y.k_c, 832);
      }
    }
  EXPECT_EQ(int8_k(1), 64);
  EXPECT_EQ(int8_k(64), 64);
  EXPECT_EQ(int8_k(65), 128);
  EXPECT_EQ(int8_panel_bytes(2, 65), (128 + 8) * 32);
}

}  // namespace
}  // namespace rnnjit
