// Random configurations through the public API against the double-precision reference: sizes
// drawn so that every dimension meets its edge cases (1, around the vector width of 16, primes),
// with every cell and every feature switched on or off at random, inference and training, on 1
// and 2 threads and on the reference ISA (the last 40 cases are sigmoid RNNs and leaky ReLUs,
// drawn after the first 300 so that those stay as they were). Where test_features walks each
// feature on fixed sizes, this walks the combinations and shapes nobody listed. The seed is
// fixed: a failure names its case and reproduces.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codegen/plan.hpp"
#include "tests/rnn_case.hpp"

namespace rnnjit {
namespace {

struct RandomCase {
  int index;
  RnnConfig config;
  Shape shape;
  Mode mode;
  Isa isa;
  int threads;
  bool lengths;
};

std::string case_name(const RandomCase& c) {
  std::string s = fmt::format("{}_{}_T{}_N{}_{}_{}_t{}", c.index, describe(c.config), c.shape.seq_len, c.shape.batch,
                              to_string(c.mode), to_string(c.isa), c.threads);
  if (c.lengths) s += "_lengths";
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}
void PrintTo(const RandomCase& c, std::ostream* os) { *os << case_name(c); }

std::vector<RandomCase> random_cases() {
  std::mt19937 rng(20261130);
  auto pick = [&](std::initializer_list<std::int64_t> values) {
    return *(values.begin() + std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng));
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  constexpr CellKind kCells[] = {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru,
                                 CellKind::gru_reset_before};
  std::vector<RandomCase> cases;
  for (int i = 0; i < 340; ++i) {
    RnnConfig c;
    c.cell = kCells[std::uniform_int_distribution<int>(0, 4)(rng)];
    if (i >= 300) c.cell = i % 2 ? CellKind::rnn_sigmoid : CellKind::rnn_relu;
    c.relu_alpha = i >= 300 && c.cell == CellKind::rnn_relu ? 0.1f : 0.0f;
    c.input_size = pick({1, 2, 7, 15, 16, 17, 33, 64});
    c.hidden_size = pick({1, 3, 8, 15, 16, 17, 31, 32, 33, 47, 64, 65, 130});
    c.num_layers = pick({1, 1, 2, 3});
    c.bidirectional = coin(0.4);
    c.reverse = !c.bidirectional && coin(0.3);
    c.batch_first = coin(0.3);
    c.dropout = c.num_layers > 1 && coin(0.3) ? 0.25f : 0.0f;
    c.gate_clip = coin(0.25) ? 0.9f : 0.0f;
    const bool lstm = c.cell == CellKind::lstm;
    c.proj_size = lstm && c.hidden_size > 1 && coin(0.3) ? std::max<std::int64_t>(1, c.hidden_size / 3) : 0;
    c.clip = lstm && coin(0.3) ? 1.5f : 0.0f;
    c.peephole = lstm && coin(0.3);
    c.input_forget = lstm && coin(0.2);
    c.bias = coin(0.8);
    c.sum_directions = c.bidirectional && coin(0.3);
    c.independent_stacks = c.bidirectional && coin(0.3);
    Shape shape{pick({1, 2, 5, 9, 12}), pick({1, 2, 3, 8, 17, 40})};
    const Mode mode = coin(0.6) ? Mode::training : Mode::inference;
    const int target = std::uniform_int_distribution<int>(0, 7)(rng);
    const Isa isa = target == 7 ? Isa::reference : Isa::avx512;
    const int threads = target == 6 ? 2 : 1;
    if (threads == 2) {  // large enough for the planner to split every step across two threads
      c.input_size = pick({64, 100});
      c.hidden_size = pick({200, 257});
      c.proj_size = c.proj_size > 0 ? c.hidden_size / 3 : 0;
      c.num_layers = std::min<std::int64_t>(c.num_layers, 2);
      shape = {12, 40};
    }
    cases.push_back({i, c, shape, mode, isa, threads, coin(0.3)});
  }
  return cases;
}

class RandomConfig : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RandomConfig, MatchesReference) {
  const RandomCase& p = GetParam();
  if (p.isa == Isa::avx512 && detect_isa() != Isa::avx512) GTEST_SKIP() << "the CPU has no AVX-512";
  test::RnnCase rc(p.config, p.shape, static_cast<unsigned>(p.index) + 1);
  if (p.lengths) rc.vary_lengths();
  rc.dropout_seed = 0xd0d0 + static_cast<std::uint64_t>(p.index);
  Rnn rnn(p.config, {.backend = Backend::jit, .isa = p.isa, .threads = p.threads});
  Execution ex = rnn.prepare(rc.shape, p.mode);
  RecordProperty("plan_threads", ex.plan().threads);
  const bool train = p.mode == Mode::training;
  const test::Tensors got = rc.run(ex), want = rc.reference(train);
  test::expect_matches(got, want, rc, train);
}

INSTANTIATE_TEST_SUITE_P(Seeded, RandomConfig, ::testing::ValuesIn(random_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace rnnjit
