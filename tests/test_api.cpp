// The public API: buffer checks with clear errors, the reserve's life cycle, caller-owned
// workspace/reserve/packed weights, no allocation in the steady state, the kernel and plan
// cache (hits, misses, compile once under concurrency, bounded), determinism across thread
// counts.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "runtime/cache.hpp"
#include "runtime/packed_weights.hpp"
#include "tests/rnn_case.hpp"
#include "tests/scoped_env.hpp"

namespace rnnjit::test {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class Api : public testing::Test {
 protected:
  RnnCase rc{{CellKind::lstm, 5, 7, 2, true}, {4, 3}};
  Rnn rnn{rc.config};
};

TEST_F(Api, RejectsWrongBufferSizesWithTheirNames) {
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  std::vector<float> y(static_cast<std::size_t>(y_elements(rc.config, rc.shape))), small(3);
  EXPECT_NE(error_of([&] { ex.forward(rc.w, {.x = small, .y = y}); }).find("x has 3 elements"), std::string::npos);
  EXPECT_NE(error_of([&] { ex.forward(rc.w, {.x = rc.x, .y = small}); }).find("y has 3 elements"), std::string::npos);
  EXPECT_NE(error_of([&] { ex.forward(small, {.x = rc.x, .y = y}); }).find("weights has 3 elements"), std::string::npos);
  EXPECT_NE(error_of([&] { ex.forward(rc.w, {.x = rc.x, .hx = small, .y = y}); }).find("hx"), std::string::npos);
  std::vector<std::byte> tiny(8);
  EXPECT_NE(error_of([&] { ex.forward(rc.w, {.x = rc.x, .y = y}, tiny); }).find("reserve has 8 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ex.forward(rc.w, {.x = rc.x, .y = y}, {}, tiny); }).find("workspace has 8 bytes"),
            std::string::npos);
}

TEST_F(Api, CellStateOnlyForLstm) {
  RnnCase gru({CellKind::gru, 3, 4, 1, false}, {2, 1});
  Execution ex = Rnn(gru.config).prepare(gru.shape, Mode::inference);
  std::vector<float> y(static_cast<std::size_t>(y_elements(gru.config, gru.shape))), c(gru.hx.size());
  EXPECT_NE(error_of([&] { ex.forward(gru.w, {.x = gru.x, .cx = c, .y = y}); }).find("only used by LSTM"),
            std::string::npos);
}

TEST_F(Api, BackwardNeedsTrainingAndAForwardFirst) {
  Execution infer = rnn.prepare(rc.shape, Mode::inference);
  std::vector<float> dx(rc.x.size()), dw(rc.w.size());
  EXPECT_NE(error_of([&] { infer.backward_data(rc.w, {.dy = rc.dy, .dx = dx}); }).find("prepared for training"),
            std::string::npos);
  Execution train = rnn.prepare(rc.shape, Mode::training);
  EXPECT_NE(error_of([&] { train.backward_data(rc.w, {.dy = rc.dy, .dx = dx}); }).find("forward training call"),
            std::string::npos);
  EXPECT_NE(error_of([&] { train.backward_weights({.x = rc.x, .dweights = dw}); }).find("backward_data"),
            std::string::npos);
}

TEST_F(Api, CallerOwnedBuffersGiveTheSameResults) {
  Execution own = rnn.prepare(rc.shape, Mode::training);
  const Tensors a = rc.run(own);
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  std::vector<std::byte> reserve(ex.reserve_size()), workspace(ex.workspace_size()), packed(ex.packed_weights_size());
  ex.pack_weights(rc.w, packed);
  Tensors b;
  b.y.resize(a.y.size());
  b.dx.resize(a.dx.size());
  b.dw.resize(a.dw.size());
  ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = b.y, .packed_weights = packed}, reserve, workspace);
  ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = b.dx}, reserve, workspace);
  ex.backward_weights({.x = rc.x, .dweights = b.dw}, reserve, workspace);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dw, b.dw);
  EXPECT_EQ(ex.allocations(), 0u);  // everything was the caller's
}

// A caller's workspace and reserve may have any alignment (their regions start at the first
// 64-byte boundary): the same results, bit for bit, at every offset.
TEST_F(Api, CallerScratchAtAnyAlignment) {
  Execution own = rnn.prepare(rc.shape, Mode::training);
  const Tensors want = rc.run(own);
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  std::vector<std::byte> reserve_store(ex.reserve_size() + 64), workspace_store(ex.workspace_size() + 64);
  for (std::size_t shift : {1, 2, 4, 17, 40, 63}) {
    const std::span<std::byte> reserve(reserve_store.data() + shift, ex.reserve_size());
    const std::span<std::byte> workspace(workspace_store.data() + (shift * 7) % 64, ex.workspace_size());
    Tensors got;
    got.y.resize(want.y.size());
    got.dx.resize(want.dx.size());
    got.dw.resize(want.dw.size());
    ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = got.y}, reserve, workspace);
    ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = got.dx}, reserve, workspace);
    ex.backward_weights({.x = rc.x, .dweights = got.dw}, reserve, workspace);
    EXPECT_EQ(got.y, want.y) << "shift " << shift;
    EXPECT_EQ(got.dx, want.dx) << "shift " << shift;
    EXPECT_EQ(got.dw, want.dw) << "shift " << shift;
  }
}

// Packed weights (cuDNN's weight space) read right from a buffer at any alignment, and from a
// copy moved to another alignment: the buffer's header says where its panels start.
TEST_F(Api, PackedWeightsWorkAtAnyAlignment) {
  Execution ex = rnn.prepare(rc.shape, Mode::inference);
  const std::size_t size = ex.packed_weights_size();
  if (size == 0) GTEST_SKIP() << "this plan packs no weights (no generated GEMM)";
  std::vector<float> want(static_cast<std::size_t>(y_elements(rc.config, rc.shape))), y(want.size());
  ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = want});  // packed into its own buffer
  std::vector<std::byte> store(size + 64), copy(size + 64);
  for (std::size_t shift : {0, 1, 4, 16, 17, 48, 63}) {
    const std::span<std::byte> packed(store.data() + shift, size);
    ex.pack_weights(rc.w, packed);
    const std::byte* panels = packed_panels(packed, ex.plan().workspace.packed_bytes, packed_layout_fingerprint(ex.plan()));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(panels) % 64, 0u) << "packed at byte " << shift;
    ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = y, .packed_weights = packed});
    EXPECT_EQ(y, want) << "packed at byte " << shift;
    const std::span<std::byte> moved(copy.data() + (shift + 21) % 64, size);
    std::memcpy(moved.data(), packed.data(), size);
    std::fill(y.begin(), y.end(), 0.0f);
    ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = y, .packed_weights = moved});
    EXPECT_EQ(y, want) << "packed at byte " << shift << ", then copied";
  }
}

// A buffer pack_weights never wrote is refused, and so is one packed for a plan with another
// layout even where the sizes agree (the batch size changes the tiles' panel widths); plans
// with one layout share their packed weights.
TEST_F(Api, PackedWeightsOfAnotherLayoutAreRefused) {
  const RnnConfig config{CellKind::lstm, 32, 64, 1, false};
  std::vector<RnnCase> cases;
  std::vector<Execution> exs;
  for (std::int64_t n : {1, 2, 4, 8}) {
    cases.emplace_back(config, Shape{3, n});
    exs.push_back(Rnn(config).prepare(cases.back().shape, Mode::inference));
  }
  if (exs.front().packed_weights_size() == 0) GTEST_SKIP() << "these plans pack no weights (no generated GEMM)";
  std::vector<std::byte> zeros(exs.front().packed_weights_size());
  std::vector<float> y(static_cast<std::size_t>(y_elements(config, cases.front().shape)));
  EXPECT_NE(error_of([&] { exs.front().forward(cases.front().w, {.x = cases.front().x, .y = y, .packed_weights = zeros}); })
                .find("were not written by pack_weights"),
            std::string::npos);
  int refused = 0, shared = 0;
  for (std::size_t a = 0; a < exs.size(); ++a)
    for (std::size_t b = 0; b < exs.size(); ++b) {
      if (a == b || exs[a].packed_weights_size() != exs[b].packed_weights_size()) continue;
      std::vector<std::byte> packed(exs[a].packed_weights_size());
      exs[a].pack_weights(cases[a].w, packed);
      std::vector<float> got(static_cast<std::size_t>(y_elements(config, cases[b].shape))), want(got.size());
      auto run = [&] { exs[b].forward(cases[b].w, {.x = cases[b].x, .y = got, .packed_weights = packed}); };
      if (packed_layout_fingerprint(exs[a].plan()) != packed_layout_fingerprint(exs[b].plan())) {
        EXPECT_NE(error_of(run).find("packed for another plan's layout"), std::string::npos) << a << " -> " << b;
        ++refused;
      } else {
        run();
        exs[b].forward(cases[b].w, {.x = cases[b].x, .y = want});
        EXPECT_EQ(got, want) << a << " -> " << b;
        ++shared;
      }
    }
  EXPECT_GT(refused, 0) << "no two plans of one size with different layouts: the test lost its point";
  EXPECT_GT(shared, 0) << "no two plans of one layout: the test lost its point";
}

TEST_F(Api, NoAllocationInTheSteadyState) {
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  rc.run(ex);
  const std::uint64_t after_first = ex.allocations();
  EXPECT_GT(after_first, 0u);
  for (int i = 0; i < 3; ++i) rc.run(ex);
  EXPECT_EQ(ex.allocations(), after_first);
}

TEST_F(Api, AccumulatingWeightGradientsAdds) {
  Execution ex = rnn.prepare(rc.shape, Mode::training);
  const Tensors once = rc.run(ex);
  std::vector<float> dw = once.dw;
  std::vector<float> y(once.y.size()), dx(once.dx.size());
  ex.forward(rc.w, {.x = rc.x, .hx = rc.hx, .cx = rc.cx, .y = y});
  ex.backward_data(rc.w, {.dy = rc.dy, .dhy = rc.dhy, .dcy = rc.dcy, .dx = dx});
  ex.backward_weights({.x = rc.x, .dweights = dw, .accumulate = true});
  // Adding into dW rounds at other points than computing it afresh: a few ulp of the partial sums.
  for (std::size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], 2.0f * once.dw[i], 1e-5 * (1.0 + std::abs(once.dw[i])));
}

TEST_F(Api, ResultsAreBitwiseIdenticalAcrossRunsAndThreadCounts) {
  RnnCase big({CellKind::gru, 128, 256, 1, false}, {20, 16});  // big enough to be split across threads
  Tensors first;
  for (int threads : {1, 2, 3}) {
    Execution ex = Rnn(big.config, {Backend::jit, Isa::detect, threads}).prepare(big.shape, Mode::training);
    for (int rep = 0; rep < 2; ++rep) {
      const Tensors t = big.run(ex);
      if (first.y.empty()) first = t;
      EXPECT_EQ(t.y, first.y) << threads << " threads";
      EXPECT_EQ(t.dx, first.dx) << threads << " threads";
      EXPECT_EQ(t.dw, first.dw) << threads << " threads";
    }
  }
}

// The same with caches so small that every GEMM of the case is cut into k blocks (where the
// sums of C round): the k block must not follow the thread count.
TEST_F(Api, ResultsAreBitwiseIdenticalAcrossThreadCountsWithKBlocks) {
  test::ScopedEnv caches("RNNJIT_CACHES", "4K,64K");
  RnnCase big({CellKind::lstm, 200, 96, 2, true}, {20, 16});
  Tensors first;
  for (int threads : {1, 2, 3}) {
    Execution ex = Rnn(big.config, {Backend::jit, Isa::detect, threads}).prepare(big.shape, Mode::training);
    ASSERT_EQ(ex.plan().caches.l2, 64 * 1024);
    const Tensors t = big.run(ex);
    if (first.y.empty()) first = t;
    EXPECT_EQ(t.y, first.y) << threads << " threads";
    EXPECT_EQ(t.dx, first.dx) << threads << " threads";
    EXPECT_EQ(t.dw, first.dw) << threads << " threads";
  }
}

TEST(Cache, CountsHitsAndMissesAndCompilesOnceUnderConcurrency) {
  clear_cache();
  const CacheStats before = cache_stats();
  const RnnConfig config{CellKind::rnn_tanh, 3, 29, 1, false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { Rnn(config).prepare({3, 2}, Mode::inference); });
  for (std::thread& t : threads) t.join();
  const CacheStats after = cache_stats();
  EXPECT_EQ(after.plan_misses - before.plan_misses, 1u);
  EXPECT_EQ(after.plan_hits - before.plan_hits, 7u);
  const std::uint64_t kernel_misses = after.kernel_misses - before.kernel_misses;
  EXPECT_GT(kernel_misses, 0u);
  EXPECT_EQ(after.kernel_hits - before.kernel_hits, 7 * kernel_misses);
  EXPECT_GT(after.plans, 0u);
  EXPECT_LE(after.kernels, after.capacity);
}

TEST(Cache, KernelsOutliveEvictionWhileAnExecutionUsesThem) {
  RnnCase rc({CellKind::lstm, 4, 5, 1, false}, {2, 2});
  Execution ex = Rnn(rc.config).prepare(rc.shape, Mode::inference);
  clear_cache();
  const Tensors t = rc.run(ex);
  expect_close(t.y, rc.reference(false).y, rc.tolerance(false), "y after the cache was cleared");
}

TEST(Config, RnnRejectsInvalidConfigs) {
  EXPECT_NE(error_of([] { Rnn({CellKind::lstm, 0, 4, 1, false}); }).find("input_size must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { Rnn({CellKind::lstm, 4, 4, 1, false}, {Backend::jit, Isa::detect, -1}); }).find("threads"),
            std::string::npos);
  EXPECT_NE(error_of([] { Rnn({CellKind::gru, 4, 4, 1, false}).prepare({0, 1}, Mode::inference); })
                .find("seq_len must be positive"),
            std::string::npos);
}

}  // namespace
}  // namespace rnnjit::test
