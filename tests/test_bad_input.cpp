// Rejected inputs that no other test pins down (docs/bad-input.md lists every rejected input,
// with its message and the test that backs it): configuration limits, enum names, environment
// variables, every caller buffer and scratch span, reserve misuse, out of memory, .npy header
// problems, and the rnn-jit command line's remaining usage and runtime errors. Each message is
// checked exactly (or by its stable prefix), and is one line.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rnnjit/config.hpp"
#include "rnnjit/npy.hpp"
#include "rnnjit/rnn.hpp"
#include "rnnjit/weights.hpp"
#include "runtime/memory.hpp"

#include "tests/scoped_env.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;
using i64 = std::int64_t;

// The message of the rnnjit::Error that f throws ("(no error)" if none, "(other exception)").
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (...) {
    return "(other exception)";
  }
  return "(no error)";
}

// Expects f to throw rnnjit::Error whose one-line message starts with `prefix`.
void expect_error(const std::function<void()>& f, const std::string& prefix) {
  const std::string msg = error_of(f);
  EXPECT_EQ(msg.substr(0, prefix.size()), prefix) << "message: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

RnnConfig lstm(i64 input, i64 hidden, i64 layers = 1, bool bidirectional = false) {
  return {CellKind::lstm, input, hidden, layers, bidirectional};
}

// ---------------------------------------------------------------------------------------------
// Configuration limits and names.

TEST(BadConfig, TooLargeSizesNameTheProductThatOverflows) {
  constexpr i64 kLimit = i64{1} << 34;
  // Each size fits a BLAS int, but one layer's weights would not fit the element limit.
  expect_error([] { validate(lstm(i64{1} << 30, i64{1} << 20)); },
               fmt::format("weights of one layer is too large: {} x {} elements overflows the limit of {}",
                           4 << 20, (i64{1} << 30) + (1 << 20) + 2, kLimit));
  // One layer fits, 1024 bidirectional layers do not.
  expect_error([] { validate(lstm(1024, 1024, 1024, true)); },
               fmt::format("weight buffer is too large: {} x 2048 elements overflows the limit of {}",
                           4096 * (2048 + 1024 + 2), kLimit));
  // T*N past the element limit, and past what BLAS can index.
  expect_error([] { validate(lstm(4, 4), Shape{i64{1} << 20, i64{1} << 20}); },
               "seq_len*batch is too large: 1048576 x 1048576 elements overflows the limit of 17179869184");
  expect_error([] { validate(lstm(4, 4), Shape{i64{1} << 16, i64{1} << 16}); },
               "seq_len*batch = 4294967296 exceeds 2147483647");
  // The activations of one layer: T*N rows of the widest row (here the input).
  expect_error([] { validate(lstm(i64{1} << 20, 4), Shape{i64{1} << 15, i64{1} << 10}); },
               "activations of one layer (seq_len*batch*width) is too large: 33554432 x 1048576 elements");
  // Sizes past a BLAS int are named with their limit.
  expect_error([] { validate(lstm(4, 4), Shape{4, i64{1} << 31}); }, "batch must be at most 2147483647, got 2147483648");
}

TEST(BadConfig, UnknownNamesListTheValidOnes) {
  expect_error([] { parse_mode("fast"); }, "unknown mode 'fast' (expected infer or train)");
  expect_error([] { parse_backend("gpu"); }, "unknown backend 'gpu' (expected auto, reference or jit)");
  expect_error([] { parse_isa("avx9000"); }, "unknown isa 'avx9000' (expected avx512, avx2 or reference)");
  expect_error([] { parse_cell("LSTM"); },
               "unknown cell 'LSTM' (expected rnn_relu, rnn_tanh, rnn_sigmoid, lstm, gru or gru_reset_before)");
  expect_error([] { gate_count(static_cast<CellKind>(9)); }, "unknown cell kind 9");
  EXPECT_EQ(parse_mode("inference"), Mode::inference);
  EXPECT_EQ(parse_mode("train"), Mode::training);
}

// The features' fields (issue #7): each value outside its domain, and each feature on a cell or
// direction it does not apply to.
TEST(BadConfig, FeatureFieldsNameTheirValue) {
  auto with = [](auto change) {
    RnnConfig c = lstm(4, 8);
    change(c);
    return c;
  };
  expect_error([&] { validate(with([](RnnConfig& c) { c.proj_size = 8; })); },
               "proj_size must be 0 (none) or in [1, hidden_size-1] = [1, 7], got 8");
  expect_error([&] { validate(with([](RnnConfig& c) { c.proj_size = -2; })); },
               "proj_size must be 0 (none) or in [1, hidden_size-1] = [1, 7], got -2");
  expect_error([&] { validate(with([](RnnConfig& c) { c.cell = CellKind::gru, c.proj_size = 2; })); },
               "proj_size applies to LSTM only, not to gru");
  expect_error([&] { validate(with([](RnnConfig& c) { c.clip = -1.0f; })); },
               "clip must be a finite value >= 0 (0: none), got -1");
  expect_error([&] { validate(with([](RnnConfig& c) { c.clip = std::numeric_limits<float>::quiet_NaN(); })); },
               "clip must be a finite value >= 0 (0: none), got nan");
  expect_error([&] { validate(with([](RnnConfig& c) { c.clip = std::numeric_limits<float>::infinity(); })); },
               "clip must be a finite value >= 0 (0: none), got inf");
  expect_error([&] { validate(with([](RnnConfig& c) { c.cell = CellKind::rnn_tanh, c.clip = 1.0f; })); },
               "clip applies to LSTM only, not to rnn_tanh");
  expect_error([&] { validate(with([](RnnConfig& c) { c.dropout = 1.0f; })); }, "dropout must be in [0, 1), got 1");
  expect_error([&] { validate(with([](RnnConfig& c) { c.dropout = -0.5f; })); }, "dropout must be in [0, 1), got -0.5");
  expect_error([&] { validate(with([](RnnConfig& c) { c.reverse = c.bidirectional = true; })); },
               "reverse applies to unidirectional networks (a bidirectional one already reads both ways)");
  expect_error([&] { validate(with([](RnnConfig& c) { c.sum_directions = true; })); },
               "sum_directions applies to bidirectional networks (it sums their two directions)");
  expect_error([&] { validate(with([](RnnConfig& c) { c.independent_stacks = true; })); },
               "independent_stacks applies to bidirectional networks (a stack of layers per direction)");
  expect_error([&] { validate(with([](RnnConfig& c) { c.relu_alpha = 0.1f; })); },
               "relu_alpha applies to rnn_relu only, not to lstm");
  expect_error([&] { validate(with([](RnnConfig& c) { c.cell = CellKind::rnn_relu, c.relu_alpha = -0.5f; })); },
               "relu_alpha must be a finite value >= 0 (0: plain ReLU), got -0.5");
  constexpr float kInf = std::numeric_limits<float>::infinity();
  expect_error([&] { validate(with([](RnnConfig& c) { c.cell = CellKind::rnn_relu, c.relu_alpha = kInf; })); },
               "relu_alpha must be a finite value >= 0 (0: plain ReLU), got inf");
}

TEST(BadLengths, SequenceLengthsAreCheckedByCountAndRange) {
  const RnnConfig config = lstm(3, 4);
  Execution ex = Rnn(config, {Backend::jit}).prepare({5, 2}, Mode::inference);
  std::vector<float> w(static_cast<std::size_t>(Rnn(config).weights_size())), x(30), y(40);
  const std::vector<std::int32_t> three{1, 2, 3}, zero{0, 5}, six{6, 1};
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .seq_lengths = three}); },
               "seq_lengths has 3 elements, expected 2 for lstm I=3 H=4 L=1 D=1 T=5 N=2");
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .seq_lengths = zero}); }, "seq_lengths[0] = 0 is outside [1, T = 5]");
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .seq_lengths = six}); }, "seq_lengths[0] = 6 is outside [1, T = 5]");
}

TEST(BadConfig, ThreadsAndIsaOfTheOptionsAndThePlanner) {
  expect_error([] { Rnn(lstm(4, 4), {Backend::jit, Isa::detect, 257}); }, "threads must be in [1, 256], got 257");
  expect_error([] { Rnn(lstm(4, 4), {Backend::jit, Isa::detect, -1}); }, "threads must be in [1, 256], got -1");
  // An ISA above the CPU's would fault on its first instruction: refused when the Rnn is made.
  if (cpu_isa() != Isa::avx512) {
    expect_error([] { Rnn(lstm(4, 4), {.isa = Isa::avx512}); },
                 fmt::format("isa avx512 but this CPU only runs {}", to_string(cpu_isa())));
  } else {
    EXPECT_EQ(error_of([] { Rnn(lstm(4, 4), {.isa = Isa::avx512}); }), "(no error)");
  }
}

// ---------------------------------------------------------------------------------------------
// Environment variables (read by the process under test: set, checked, restored).

TEST(BadEnv, NumThreadsMustBeAnIntegerFrom1To256) {
  for (const char* value : {"0", "257", "-1", "abc", "4x", "2.5"}) {
    ScopedEnv env("RNNJIT_NUM_THREADS", value);
    expect_error([] { Rnn(lstm(4, 4)); },
                 fmt::format("RNNJIT_NUM_THREADS must be an integer in [1, 256], got '{}'", value));
  }
  // Empty means unset; an explicit Options::threads never reads it.
  ScopedEnv empty("RNNJIT_NUM_THREADS", "");
  EXPECT_EQ(error_of([] { Rnn(lstm(4, 4)); }), "(no error)");
  ScopedEnv bad("RNNJIT_NUM_THREADS", "0");
  EXPECT_EQ(error_of([] { Rnn(lstm(4, 4), {Backend::jit, Isa::detect, 2}); }), "(no error)");
}

TEST(BadEnv, IsaMustBeKnownAndRunOnThisCpu) {
  Isa cpu;
  {
    ScopedEnv empty("RNNJIT_ISA", "");  // empty means unset: the CPU's best
    cpu = detect_isa();
  }
  {
    ScopedEnv env("RNNJIT_ISA", "AVX512");
    expect_error([] { detect_isa(); }, "unknown isa 'AVX512' (expected avx512, avx2 or reference)");
    expect_error([] { Rnn(lstm(4, 4)); }, "unknown isa 'AVX512'");
  }
  // An ISA the CPU lacks: only testable on a CPU without AVX-512 (or AVX2).
  if (cpu != Isa::avx512) {
    ScopedEnv env("RNNJIT_ISA", "avx512");
    expect_error([] { detect_isa(); }, fmt::format("RNNJIT_ISA=avx512 but this CPU only runs {}", to_string(cpu)));
  }
}

// ---------------------------------------------------------------------------------------------
// Caller buffers, scratch spans, the reserve's life cycle.

class BadBuffers : public testing::Test {
 protected:
  static std::vector<float> buffer(i64 n) { return std::vector<float>(static_cast<std::size_t>(n), 0.5f); }

  const RnnConfig config = lstm(5, 7, 2, true);
  const Shape shape{4, 3};
  const std::string where = "for lstm I=5 H=7 L=2 D=2 T=4 N=3";
  const i64 states = state_elements(config, shape);
  std::vector<float> w = buffer(WeightLayout(config).total_elements()), x = buffer(x_elements(config, shape)),
                     y = buffer(y_elements(config, shape)), dy = buffer(y_elements(config, shape)),
                     dx = buffer(x_elements(config, shape)), dw = buffer(WeightLayout(config).total_elements()),
                     small = buffer(3);
};

TEST_F(BadBuffers, EveryTensorIsCheckedByName) {
  Execution ex = Rnn(config).prepare(shape, Mode::training);
  auto msg = [&](const char* name, i64 expected) {
    return fmt::format("{} has 3 elements, expected {} {}", name, expected, where);
  };
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .hy = small}); }, msg("hy", states));
  expect_error([&] { ex.forward(w, {.x = x, .cx = small, .y = y}); }, msg("cx", states));
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .cy = small}); }, msg("cy", states));
  expect_error([&] { ex.forward(small, {.x = x, .y = y}); },
               fmt::format("weights has 3 elements, expected {} for lstm I=5 H=7 L=2 D=2", w.size()));
  ex.forward(w, {.x = x, .y = y});
  expect_error([&] { ex.backward_data(w, {.dy = small, .dx = dx}); }, msg("dy", static_cast<i64>(y.size())));
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = small}); }, msg("dx", static_cast<i64>(x.size())));
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dhy = small, .dx = dx}); }, msg("dhy", states));
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx, .dhx = small}); }, msg("dhx", states));
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dcy = small, .dx = dx}); }, msg("dcy", states));
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx, .dcx = small}); }, msg("dcx", states));
  expect_error([&] { ex.backward_data(small, {.dy = dy, .dx = dx}); }, "weights has 3 elements");
  ex.backward_data(w, {.dy = dy, .dx = dx});
  expect_error([&] { ex.backward_weights({.x = small, .dweights = dw}); }, msg("x", static_cast<i64>(x.size())));
  expect_error([&] { ex.backward_weights({.x = x, .dweights = small}); }, msg("dweights", static_cast<i64>(dw.size())));
  ex.backward_weights({.x = x, .dweights = dw});  // the rejected calls changed nothing
}

TEST_F(BadBuffers, CellStatesOnlyForLstm) {
  const RnnConfig gru{CellKind::gru, 5, 7, 1, false};
  Execution ex = Rnn(gru).prepare(shape, Mode::training);
  std::vector<float> gw = buffer(WeightLayout(gru).total_elements()), gy = buffer(y_elements(gru, shape)),
                     c = buffer(state_elements(gru, shape));
  std::vector<float> gdy = gy;
  expect_error([&] { ex.forward(gw, {.x = x, .y = gy, .cy = c}); }, "cy is only used by LSTM, not by gru");
  ex.forward(gw, {.x = x, .y = gy});
  expect_error([&] { ex.backward_data(gw, {.dy = gdy, .dcy = c, .dx = dx}); }, "dcy is only used by LSTM, not by gru");
  expect_error([&] { ex.backward_data(gw, {.dy = gdy, .dx = dx, .dcx = c}); }, "dcx is only used by LSTM, not by gru");
}

TEST_F(BadBuffers, ScratchSpansTooSmall) {
  Execution ex = Rnn(config).prepare(shape, Mode::training);
  ASSERT_GT(ex.reserve_size(), 0u);
  ASSERT_GT(ex.workspace_size(), 0u);
  std::vector<std::byte> tiny(8);
  // Too small, in every call that takes them.
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}, tiny); },
               fmt::format("reserve has 8 bytes, needs {}", ex.reserve_size()));
  expect_error([&] { ex.backward_weights({.x = x, .dweights = dw}, {}, tiny); },
               fmt::format("workspace has 8 bytes, needs {}", ex.workspace_size()));
}

TEST_F(BadBuffers, PackedWeightsMustHaveTheirSize) {
  Execution ex = Rnn(config).prepare(shape, Mode::inference);
  std::vector<std::byte> packed(3);
  expect_error([&] { ex.pack_weights(w, packed); },
               fmt::format("packed weights buffer has 3 bytes, expected {}", ex.packed_weights_size()));
  expect_error([&] { ex.pack_weights(small, packed); }, "weights has 3 elements");
  if (ex.packed_weights_size() == 0) GTEST_SKIP() << "this plan packs no weights (no generated GEMM)";
  expect_error([&] { ex.forward(w, {.x = x, .y = y, .packed_weights = packed}); },
               fmt::format("packed_weights has 3 bytes, expected {} (from pack_weights)", ex.packed_weights_size()));
}

TEST_F(BadBuffers, ReserveMisuse) {
  std::vector<std::byte> reserve_a, reserve_b;
  Execution infer = Rnn(config).prepare(shape, Mode::inference);
  std::vector<std::byte> some(256);
  expect_error([&] { infer.forward(w, {.x = x, .y = y}, some); },
               "a reserve was given to an Execution prepared for inference");
  expect_error([&] { infer.backward_weights({.x = x, .dweights = dw}); },
               "backward_weights needs an Execution prepared for training, this one is for inference");

  Execution ex = Rnn(config).prepare(shape, Mode::training);
  reserve_a.resize(ex.reserve_size());
  reserve_b.resize(ex.reserve_size());
  ex.forward(w, {.x = x, .y = y}, reserve_a);
  // backward with another reserve than the forward call's
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}, reserve_b); },
               "backward_data needs a forward training call with this reserve first (backward_data consumes the "
               "reserve's gates)");
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}); }, "backward_data needs a forward training call");
  ex.backward_data(w, {.dy = dy, .dx = dx}, reserve_a);
  // the reserve's gates are consumed: a second backward_data needs a new forward
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}, reserve_a); },
               "backward_data needs a forward training call with this reserve first");
  expect_error([&] { ex.backward_weights({.x = x, .dweights = dw}, reserve_b); },
               "backward_weights needs backward_data with this reserve first");
  ex.backward_weights({.x = x, .dweights = dw}, reserve_a);
  // A new forward starts a new cycle: backward_weights must wait for backward_data again.
  ex.forward(w, {.x = x, .y = y}, reserve_a);
  expect_error([&] { ex.backward_weights({.x = x, .dweights = dw}, reserve_a); },
               "backward_weights needs backward_data with this reserve first");
}

TEST_F(BadBuffers, ReferenceBackendReserveMisuse) {
  Execution ex = Rnn(config, {Backend::reference}).prepare(shape, Mode::training);
  EXPECT_EQ(ex.backend(), Backend::reference);
  std::vector<std::byte> some(256);
  expect_error([&] { ex.forward(w, {.x = x, .y = y}, some); },
               "the reference backend keeps its reserve internally: pass no reserve");
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}); }, "backward_data needs a forward training call first");
  ex.forward(w, {.x = x, .y = y});
  expect_error([&] { ex.backward_data(w, {.dy = dy, .dx = dx}, some); },
               "the reference backend keeps its reserve internally: pass no reserve");
  expect_error([&] { ex.backward_weights({.x = x, .dweights = dw}); }, "backward_weights needs backward_data first");
  ex.backward_data(w, {.dy = dy, .dx = dx});
  expect_error([&] { ex.backward_weights({.x = x, .dweights = dw}, some); },
               "the reference backend keeps its reserve internally: pass no reserve");
  ex.backward_weights({.x = x, .dweights = dw});
}

// An Execution that cannot allocate its own reserve says so (address space capped with
// RLIMIT_AS for the call; sanitizers reserve terabytes of address space and abort instead).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

std::size_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  statm >> pages;
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(BadMemory, OutOfMemoryIsAnErrorNotACrash) {
  if (kSanitized) GTEST_SKIP() << "sanitizers abort on a failed allocation";
  // 4 layers of H=256 over T*N = 65536 rows: a reserve of about 1.5 GiB, inputs of 256 KiB.
  const RnnConfig config{CellKind::lstm, 1, 256, 4, false};
  const Shape shape{4096, 16};
  Execution ex = Rnn(config, {Backend::jit, Isa::detect, 1}).prepare(shape, Mode::training);
  ASSERT_GT(ex.reserve_size(), std::size_t{1} << 30);
  std::vector<float> w(static_cast<std::size_t>(WeightLayout(config).total_elements()), 0.1f),
      x(static_cast<std::size_t>(x_elements(config, shape)), 0.1f), y(static_cast<std::size_t>(y_elements(config, shape)));
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  rlimit capped = saved;
  capped.rlim_cur = address_space_bytes() + (std::size_t{512} << 20);
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < capped.rlim_cur) GTEST_SKIP() << "already capped";
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &capped), 0);
  const std::string msg = error_of([&] { ex.forward(w, {.x = x, .y = y}); });
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_EQ(msg.rfind("out of memory: could not allocate ", 0), 0u) << msg;
}

// A plan larger than the memory left fails when it is prepared, before anything is allocated
// (Linux would grant the allocation and kill the process when the pages are touched).
TEST(BadMemory, APlanLargerThanTheMemoryLeftFailsWhenPrepared) {
  {
    ScopedEnv limit("RNNJIT_MEMORY_LIMIT", "1M");
    const std::string msg = error_of([] { Rnn(lstm(800, 800), {Backend::jit}).prepare({300, 20}, Mode::training); });
    EXPECT_EQ(msg.rfind("the training plan for lstm I=800 H=800 L=1 D=1 T=300 N=20 (", 0), 0u) << msg;
    EXPECT_NE(msg.find("more than the 1.0 MiB available (RNNJIT_MEMORY_LIMIT); nothing was allocated"),
              std::string::npos) << msg;
    // The reference backend plans no workspace of its own.
    EXPECT_NO_THROW(Rnn(lstm(8, 8), {Backend::reference}).prepare({3, 2}, Mode::training));
  }
  for (const char* bad : {"12X", "-5", "0", "M", "99999999999999999999G"}) {
    ScopedEnv limit("RNNJIT_MEMORY_LIMIT", bad);
    expect_error([] { Rnn(lstm(8, 8), {Backend::jit}).prepare({3, 2}, Mode::inference); },
                 fmt::format("RNNJIT_MEMORY_LIMIT must be a positive byte count with an optional K, M or G suffix, "
                             "got '{}'", bad));
  }
  // Without the variable: 32 GiB of input projections, more than this machine has left.
  const RnnConfig big = lstm(1, 4096);
  const std::size_t needed = std::size_t{16384} * 32 * 4 * 4096 * sizeof(float);
  if (available_memory().bytes == 0 || available_memory().bytes >= needed) GTEST_SKIP() << "this machine has 32 GiB free";
  const std::string msg = error_of([&] { Rnn(big, {Backend::jit}).prepare({16384, 32}, Mode::inference); });
  EXPECT_NE(msg.find("available (MemAvailable in /proc/meminfo); nothing was allocated"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// .npy files: the header problems other tests do not name, read errors, the writer.

// A version 1.0 file: the header padded as numpy pads it (unless !pad), then the data.
std::vector<std::byte> npy_v1(std::string header, const std::string& data = std::string(4, '\0'), bool pad = true) {
  if (pad) {
    const std::size_t padded = (10 + header.size() + 1 + 63) / 64 * 64 - 10;
    header.append(padded - header.size() - 1, ' ');
    header.push_back('\n');
  }
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  out += data;
  std::vector<std::byte> bytes(out.size());
  std::transform(out.begin(), out.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

TEST(BadNpy, EveryHeaderDictProblemIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"['descr']", "expected '{' at the start of the header dict (at offset 0)"},
      {"{descr: '<f4'}", "expected a quoted key (at offset 1)"},
      {"{'descr' '<f4'}", "expected ':' after key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (1,)}",
       "duplicate key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}", "duplicate key 'shape'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}' after a value"},
      {"{'descr': '<f4\n', 'fortran_order': False, 'shape': (1,)}", "newline inside a string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,)}", "expected an integer dimension in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1; 2)}", "expected ',' or ')' in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
       "'shape' is not a tuple (a one-element tuple needs a trailing comma)"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", "'fortran_order' is not True or False"},
  };
  for (const auto& [header, problem] : cases) {
    SCOPED_TRACE(header);
    expect_error([&] { npy::parse(npy_v1(header), "h.npy"); }, std::string("h.npy: cannot parse header dict: ") + problem);
  }
  // The header ends inside a string (no padding: the data follows the quote's text).
  expect_error([] { npy::parse(npy_v1("{'descr': '<f4", "", false), "h.npy"); },
               "h.npy: cannot parse header dict: unterminated string");
  // A non-ASCII byte is fine in a version 3.0 header (UTF-8), but still no dtype.
  std::vector<std::byte> v3 = npy_v1("{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': (1,)}");
  v3[6] = std::byte{3};
  v3.insert(v3.begin() + 10, {std::byte{0}, std::byte{0}});  // 4-byte header length
  expect_error([&] { npy::parse(v3, "u.npy"); }, "u.npy: unsupported dtype '<f\\xc3\\xa9'");
}

TEST(BadNpy, ReadErrorsNameTheFile) {
  // A file that opens but cannot be read: /proc/self/mem at offset 0 (unmapped) fails with EIO.
  const std::string mem = "/proc/self/mem";
  if (::access(mem.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << mem;
  expect_error([&] { npy::read(mem); }, mem + ": cannot read: ");
  expect_error([] { npy::read("/nonexistent/x.npy"); }, "/nonexistent/x.npy: cannot open: No such file or directory");
}

TEST(BadNpy, WriterNamesTheShapeProblem) {
  const std::vector<float> one(1), none;
  expect_error([&] { npy::serialize(npy::DType::f32, {-1}, std::as_bytes(std::span(none))); },
               "cannot write shape (-1,): negative dimension");
  expect_error([&] { npy::serialize(npy::DType::f32, {i64{1} << 40, i64{1} << 40}, std::as_bytes(std::span(one))); },
               "cannot write shape (1099511627776, 1099511627776): too many elements");
  expect_error([&] { npy::serialize(npy::DType::f32, std::vector<i64>(33, 1), std::as_bytes(std::span(one))); },
               fmt::format("cannot write shape ({}): more than 32 dimensions", fmt::join(std::vector<int>(33, 1), ", ")));
  expect_error([&] { npy::serialize(npy::DType::f32, {2, 3}, std::as_bytes(std::span(one))); },
               "cannot write shape (2, 3): it holds 6 elements but the data has 1");
  expect_error([&] { npy::write_f32("/nonexistent/dir/y.npy", {1}, one); }, "/nonexistent/dir/y.npy: cannot write: ");
}

// ---------------------------------------------------------------------------------------------
// The command line: status and the one line on stderr.

struct CliResult {
  int status = -1;
  std::string out, err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class BadCli : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("rnnjit_test_bad_input_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // `env` is prepended ("NAME=value ..."); `stdout_to` replaces the redirection of stdout.
  CliResult cli(const std::vector<std::string>& args, const std::string& env = "", std::string stdout_to = "") const {
    std::string cmd;
    if (!env.empty()) {
      cmd += "env ";
      cmd += env;
      cmd += ' ';
    }
    cmd += shell_quote(RNNJIT_CLI_PATH);
    for (const std::string& a : args) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    cmd += ' ';
    if (stdout_to.empty()) {
      cmd += '>';
      cmd += shell_quote(path("stdout.txt"));
    } else {
      cmd += stdout_to;
    }
    cmd += " 2>";
    cmd += shell_quote(path("stderr.txt"));
    const int rc = std::system(cmd.c_str());
    CliResult r;
    r.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = slurp(path("stdout.txt"));
    r.err = slurp(path("stderr.txt"));
    return r;
  }

  // Status `status` and exactly one stderr line "rnn-jit: error: <message starting with prefix>".
  void expect_error(const std::vector<std::string>& args, int status, const std::string& prefix,
                    const std::string& env = "", const std::string& stdout_to = "") const {
    std::string line = env;
    line += " rnn-jit";
    for (const auto& a : args) {
      line += ' ';
      line += a;
    }
    SCOPED_TRACE(line);
    const CliResult r = cli(args, env, stdout_to);
    EXPECT_EQ(r.status, status) << r.err;
    const std::string expected = "rnn-jit: error: " + prefix;
    EXPECT_EQ(r.err.substr(0, expected.size()), expected) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  }

  // A small GRU's parameters (params/) and input x.npy [T, N, I].
  void write_model(const RnnConfig& config, const Shape& shape) const {
    const WeightLayout layout(config);
    fs::create_directories(dir_ / "params");
    for (const ParamBlock& b : layout.blocks())
      npy::write_f32((dir_ / "params" / (b.name + ".npy")).string(), b.shape,
                     std::vector<float>(static_cast<std::size_t>(b.size), 0.1f));
    npy::write_f32(path("x.npy"), {shape.seq_len, shape.batch, config.input_size},
                   std::vector<float>(static_cast<std::size_t>(x_elements(config, shape)), 0.5f));
  }
  std::vector<std::string> run_args() const {
    return {"run", "--cell", "gru", "--input-size", "5", "--hidden-size", "3", "--params", path("params"),
            "--x", path("x.npy"), "--out", path("out")};
  }

  fs::path dir_;
};

const std::vector<std::string> kSmall = {"--cell", "gru", "--input-size", "4", "--hidden-size", "8",
                                         "--seq", "2", "--batch", "2"};
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(BadCli, ShapesThatOverflowNameTheFlags) {
  expect_error({"plan", "--seq", "100000", "--batch", "100000"}, 2, "--seq*--batch = 10000000000 exceeds 2147483647");
  expect_error({"plan", "--hidden-size", "1073741824"}, 2, "gates*--hidden-size = 4294967296 exceeds 2147483647");
  expect_error({"plan", "--input-size", "3000000000"}, 2, "--input-size must be at most 2147483647, got 3000000000");
  expect_error({"plan", "--layers", "2000"}, 2, "--layers must be at most 1024, got 2000");
}

TEST_F(BadCli, Cli11ParseErrorsNameTheFlag) {
  expect_error({"plan", "--cell", "gru", "--cell", "lstm"}, 2, "--cell: At Most 1 required but received 2");
  expect_error({"plan", "--bidirectional=maybe"}, 2, "Could not convert: --bidirectional = maybe");
  expect_error({"plan", "--seq"}, 2, "--seq: 1 required INT missing");
  // CLI11 saturates an integer past int64 to INT64_MAX (strtoll), which the size check then names.
  expect_error({"plan", "--batch", "99999999999999999999"}, 2,
               "--batch must be at most 2147483647, got 9223372036854775807");
}

TEST_F(BadCli, RunRejectsInconsistentFiles) {
  const RnnConfig gru{CellKind::gru, 5, 3, 1, false};
  write_model(gru, {4, 2});
  // --dcy (like --c0) only for LSTM.
  expect_error(with(run_args(), {"--dy", path("dy.npy"), "--dcy", path("dcy.npy")}), 2,
               "--dcy is only valid with --cell lstm");
  // x with no time steps.
  npy::write_f32(path("x.npy"), {0, 2, 5}, std::vector<float>{});
  expect_error(run_args(), 1, path("x.npy") + ": shape (0, 2, 5) has no time steps or no batch");
  // x whose T*N makes the activations too large for the network (a 2 MiB file, 2^19 + 1 rows of
  // H = 2^15 units: one more than 2^34 elements).
  npy::write_f32(path("x.npy"), {(i64{1} << 19) + 1, 1, 1}, std::vector<float>((std::size_t{1} << 19) + 1));
  expect_error({"run", "--cell", "rnn_relu", "--input-size", "1", "--hidden-size", "32768", "--params",
                path("params"), "--x", path("x.npy"), "--out", path("out")},
               1, path("x.npy") + ": activations of one layer (seq_len*batch*width) is too large");
  // An output directory that is a file.
  write_model(gru, {4, 2});
  std::ofstream(path("file")) << "not a directory";
  std::vector<std::string> a = run_args();
  *(std::find(a.begin(), a.end(), "--out") + 1) = path("file");
  expect_error(a, 1, path("file") + ": cannot create output directory: ");
}

TEST_F(BadCli, BenchAndDemoRejectBadCounts) {
  expect_error(with({"bench"}, with(kSmall, {"--reps", "0"})), 2, "--reps must be positive, got 0");
  expect_error(with({"bench"}, with(kSmall, {"--warmup", "-1"})), 2, "--warmup must not be negative, got -1");
  expect_error(with({"bench"}, with(kSmall, {"--compare", "baseline,mkl"})), 2,
               "--compare: unknown peer 'mkl' (expected onednn, onednn_bf16, onednn_int8, baseline, reference, strict or bf16)");
  expect_error(with({"bench"}, with(kSmall, {"--unsorted-lengths"})), 2,
               "--unsorted-lengths requires --mixed-lengths");
  expect_error(with({"demo"}, with(kSmall, {"--check-seq", "0"})), 2, "--check-seq must be positive, got 0");
  expect_error(with({"demo"}, with(kSmall, {"--repeats", "0"})), 2, "--repeats must be positive, got 0");
  expect_error(with({"demo"}, with(kSmall, {"--asm-lines", "-1"})), 2, "--asm-lines must not be negative, got -1");
  // --compare onednn is a usage error only in an rnn-jit built without oneDNN.
  const CliResult r = cli(with({"bench"}, with(kSmall, {"--compare", "onednn", "--reps", "1", "--warmup", "0"})));
  if (r.status != 0) {
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err, "rnn-jit: error: --compare onednn: oneDNN was not found when rnn-jit was built\n");
  }
  // A feature the oneDNN peer does not model is refused, not timed as a different network.
  const CliResult f = cli(with({"bench"}, with(kSmall, {"--compare", "onednn", "--gate-clip", "0.5", "--reps", "1"})));
  EXPECT_EQ(f.status, 2) << f.err;
  if (r.status == 0) {
    EXPECT_NE(f.err.find("--compare onednn: the oneDNN peer runs plain configurations only"), std::string::npos) << f.err;
    // The bf16 peer runs no LSTM projection (oneDNN's is FP32 only).
    expect_error({"bench", "--cell", "lstm", "--input-size", "4", "--hidden-size", "8", "--proj-size", "3", "--seq", "2",
                  "--batch", "2", "--compare", "onednn_bf16"},
                 2, "--compare onednn_bf16: the bf16 peer runs no --proj-size");
  }
}

TEST_F(BadCli, DumpRefusesWhatItCannotWrite) {
  // Training: a forward and a backward gate kernel.
  const std::vector<std::string> dump = with({"dump"}, with(kSmall, {"--target", "reference", "--mode", "train"}));
  // Several kernels' raw bytes on stdout.
  expect_error(with(dump, {"--format", "bin"}), 2, "--format bin to stdout writes one kernel's bytes: give --kernel ");
  // -o to something that is not a directory.
  std::ofstream(path("file")) << "not a directory";
  expect_error(with(dump, {"-o", path("file")}), 1, path("file") + ": cannot create output directory: ");
  expect_error(with({"dump"}, with(kSmall, {"--target", "cuda", "--format", "cu", "-o", path("file")})), 1,
               path("file") + ": cannot create output directory");
  // A kernel's file that cannot be written (a directory is in the way).
  ASSERT_EQ(cli(with(dump, {"-o", path("k")})).status, 0);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir_ / "k")) files.push_back(e.path());
  ASSERT_FALSE(files.empty());
  fs::remove(files.front());
  fs::create_directories(files.front());
  expect_error(with(dump, {"-o", path("k")}), 1, files.front().string() + ": cannot write");
}

TEST_F(BadCli, DumpBinNeedsAWritableNonTerminalStdout) {
  const std::vector<std::string> dump = with({"dump"}, with(kSmall, {"--target", "avx512", "--format", "bin"}));
  ASSERT_EQ(cli(with(dump, {"-o", path("k")})).status, 0);
  std::string kernel;
  for (const auto& e : fs::directory_iterator(dir_ / "k")) kernel = e.path().stem().string();
  ASSERT_FALSE(kernel.empty());
  // stdout closed: the write fails.
  expect_error(with(dump, {"--kernel", kernel}), 1, "cannot write to stdout", "", ">&-");
  // stdout a terminal: raw bytes are refused.
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminal";
  const std::string tty = ::ptsname(master);
  expect_error(with(dump, {"--kernel", kernel}), 2,
               "--format bin writes raw bytes: give -o DIR or redirect stdout to a file or pipe", "",
               ">" + shell_quote(tty));
  ::close(master);
}

TEST_F(BadCli, CacheCapacityMustBeAPositiveInteger) {
  const std::vector<std::string> dump = with({"dump"}, with(kSmall, {"--target", "reference", "--format", "hex"}));
  for (const char* value : {"0", "-3", "abc", "4x", "''"})
    expect_error(dump, 1,
                 fmt::format("RNNJIT_CACHE_CAPACITY must be a positive integer, got '{}'",
                             std::string(value) == "''" ? "" : value),
                 std::string("RNNJIT_CACHE_CAPACITY=") + value);
  EXPECT_EQ(cli(dump, "RNNJIT_CACHE_CAPACITY=1").status, 0);
}

TEST_F(BadCli, EnvironmentErrorsAreRuntimeFailures) {
  expect_error(with({"dump"}, kSmall), 1, "unknown isa 'avx9000' (expected avx512, avx2 or reference)",
               "RNNJIT_ISA=avx9000");
  expect_error(with({"bench"}, with(kSmall, {"--reps", "1", "--warmup", "0"})), 1,
               "RNNJIT_NUM_THREADS must be an integer in [1, 256], got '0'", "RNNJIT_NUM_THREADS=0");
}

}  // namespace
}  // namespace rnnjit
