// The planner's plans: regions never overlap, every region is exactly as large as what the
// steps touch, every operand stays inside its buffer, and plans print as text and JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/plan_extents.hpp"
#include "codegen/planner.hpp"
#include "codegen/register_budgets.hpp"
#include "tests/plan_steps.hpp"

namespace rnnjit {
namespace {

struct PlanCase {
  CellKind cell;
  std::int64_t I, H, L;
  bool bi;
  std::int64_t T, N;
  Mode mode;
  Isa isa;
  int threads;
  FpMath fpmath = FpMath::strict;
  Quantize quantize = Quantize::none;
};

std::vector<PlanCase> cases() {
  std::vector<PlanCase> out;
  for (CellKind cell : {CellKind::rnn_relu, CellKind::rnn_tanh, CellKind::lstm, CellKind::gru})
    for (Mode mode : {Mode::inference, Mode::training})
      for (Isa isa : {Isa::avx512, Isa::reference})
        for (bool bi : {false, true}) {
          out.push_back({cell, 5, 17, 3, bi, 4, 3, mode, isa, 2});
          out.push_back({cell, 800, 800, 2, bi, 300, 20, mode, isa, 2});
          out.push_back({cell, 40, 100, 2, bi, 30, 37, mode, isa, 2});  // one direction: split by rows
          // K = T*N over one k block and dW_ih, dW_hh tiled apart: no shared A panels.
          out.push_back({cell, 300, 64, 1, bi, 60, 37, mode, isa, 2});
          out.push_back({cell, 1, 1, 1, bi, 1, 1, mode, isa, 1});
          if (isa != Isa::avx512) continue;
          // bf16: every GEMM's A rounded into panels, B packed into bf16 tiles (training too).
          out.push_back({cell, 5, 17, 3, bi, 4, 3, mode, isa, 2, FpMath::bf16});
          out.push_back({cell, 40, 100, 2, bi, 30, 37, mode, isa, 2, FpMath::bf16});
          out.push_back({cell, 300, 64, 1, bi, 60, 37, mode, isa, 2, FpMath::bf16});
          if (mode == Mode::training) continue;
          // int8: every GEMM on the weights quantizes its A into uint8 rows, B packed as int8
          // panels (AVX-512 plans: the avx512_vnni unit; AVX2 plans: the avx2 unit's ymm tiles).
          for (Isa int8_isa : {Isa::avx512, Isa::avx2}) {
            out.push_back({cell, 5, 17, 3, bi, 4, 3, mode, int8_isa, 2, FpMath::strict, Quantize::int8_dynamic});
            out.push_back({cell, 40, 100, 2, bi, 30, 37, mode, int8_isa, 2, FpMath::strict, Quantize::int8_dynamic});
            out.push_back({cell, 800, 800, 2, bi, 300, 20, mode, int8_isa, 2, FpMath::strict, Quantize::int8_dynamic});
          }
        }
  return out;
}

class PlanTest : public testing::TestWithParam<PlanCase> {
 protected:
  Plan plan() const {
    const PlanCase& c = GetParam();
    return make_plan({c.cell, c.I, c.H, c.L, c.bi}, {c.T, c.N}, c.mode, c.isa, c.threads, {}, {}, c.fpmath,
                     Bf16Unit::amx, c.quantize, c.isa == Isa::avx2 ? Int8Unit::avx2 : Int8Unit::avx512_vnni);
  }
};

// Reserve and packed regions never overlap; workspace regions overlap only where no call uses
// both (the workspace holds nothing from one call to the next).
TEST_P(PlanTest, RegionsAreAlignedAndDisjoint) {
  const Plan p = plan();
  const std::vector<std::uint8_t> calls = region_calls(p);
  const auto& regions = p.workspace.regions;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const Region& r = regions[i];
    EXPECT_EQ(r.offset % kRegionAlignment, 0u) << r.name;
    const std::size_t total = r.space == Space::workspace ? p.workspace.workspace_bytes
                              : r.space == Space::reserve ? p.workspace.reserve_bytes
                                                          : p.workspace.packed_bytes;
    EXPECT_LE(r.offset + r.size, total) << r.name;
    for (std::size_t j = 0; j < i; ++j) {
      const Region& q = regions[j];
      const bool overlap = q.space == r.space && q.offset < r.offset + r.size && r.offset < q.offset + q.size;
      const bool may_overlap = r.space == Space::workspace && (calls[i] & calls[j]) == 0;
      EXPECT_TRUE(!overlap || may_overlap) << q.name << " overlaps " << r.name;
    }
  }
  if (p.mode == Mode::inference) {
    EXPECT_EQ(p.workspace.reserve_bytes, 0u);
  }
}

// Training's calls share no workspace region on the DeepSpeech2 LSTM, so its workspace is as
// large as its largest call's regions (the weight gradients' A panels and B panels), not the
// sum over all three calls.
TEST(Planner, WorkspaceIsAsLargeAsItsLargestCall) {
  for (std::int64_t layers : {1, 5}) {
    const Plan p = make_plan({CellKind::lstm, 800, 800, layers, layers > 1}, {300, 20}, Mode::training, Isa::avx512, 2);
    const std::vector<std::uint8_t> calls = region_calls(p);
    std::size_t per_call[4] = {}, all = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const Region& r = p.workspace.regions[i];
      if (r.space != Space::workspace) continue;
      all += align_to_region(r.size);
      for (int c = 0; c < 4; ++c)
        if (calls[i] & (1u << c)) per_call[c] += align_to_region(r.size);
    }
    SCOPED_TRACE(fmt::format("{} layers", layers));
    EXPECT_EQ(p.workspace.workspace_bytes, *std::max_element(per_call, per_call + 4));
    EXPECT_LT(p.workspace.workspace_bytes, all * 2 / 3);
  }
}

// The executor touches exactly what the planner sized: each region's highest touched element
// is its last one, and nothing reaches past it (check_extents throws otherwise).
// The lanes of a stage run at once, lane i on thread i % threads: no two lanes on different
// threads may use one scratch region (A or B panels).
void expect_lanes_share_no_scratch(const Plan& p) {
  for (const auto* calls : {&p.pack_weights, &p.forward, &p.backward_data, &p.backward_weights})
    for (const Stage& stage : *calls) {
      std::vector<std::vector<int>> scratch(stage.lanes.size());
      for (std::size_t i = 0; i < stage.lanes.size(); ++i)
        for_each_extent(p, {Stage{{stage.lanes[i]}}}, [&](const Extent& e) {
          if (e.operand.buffer != Buffer::workspace) return;
          const std::string& name = p.workspace.regions[static_cast<std::size_t>(e.operand.region)].name;
          if (name.starts_with("a_panels") || name.starts_with("b_panels")) scratch[i].push_back(e.operand.region);
        });
      const std::size_t threads = std::min(scratch.size(), static_cast<std::size_t>(p.threads));
      for (std::size_t i = 0; i < scratch.size(); ++i)
        for (std::size_t j = i + 1; j < scratch.size(); ++j)
          for (int region : i % threads == j % threads ? std::vector<int>{} : scratch[i])
            EXPECT_EQ(std::count(scratch[j].begin(), scratch[j].end(), region), 0)
                << p.workspace.regions[static_cast<std::size_t>(region)].name << " in lanes " << i << " and " << j;
    }
}

TEST_P(PlanTest, LanesShareNoScratch) { expect_lanes_share_no_scratch(plan()); }

// bf16 plans round every GEMM's A into panels, the recurrences' too: each lane its own (two
// directions as lanes, and a direction's batch rows as lanes).
TEST(Planner, Bf16LanesShareNoScratch) {
  for (const auto& [cell, H, N, bi] : {std::tuple{CellKind::gru, 400, 20, false}, {CellKind::lstm, 32, 96, false},
                                       {CellKind::lstm, 50, 21, true}, {CellKind::gru, 128, 64, true}}) {
    const Plan p = make_plan({cell, 40, H, 2, bi}, {9, N}, Mode::inference, Isa::avx512, 2, {}, {}, FpMath::bf16);
    ASSERT_EQ(p.fpmath, FpMath::bf16);
    SCOPED_TRACE(fmt::format("{} H={} N={} bidirectional={}", to_string(cell), H, N, bi));
    expect_lanes_share_no_scratch(p);
  }
}

TEST_P(PlanTest, RegionSizesEqualWhatTheStepsTouch) {
  const Plan p = plan();
  EXPECT_NO_THROW(check_extents(p));
  std::vector<std::int64_t> touched(p.workspace.regions.size(), 0);
  for (const auto* stages : {&p.pack_weights, &p.forward, &p.backward_data, &p.backward_weights})
    for_each_extent(p, *stages, [&](const Extent& e) {
      if (e.operand.region >= 0) {
        auto& t = touched[static_cast<std::size_t>(e.operand.region)];
        t = std::max(t, e.end);
      }
    });
  for (std::size_t i = 0; i < touched.size(); ++i) {
    if (static_cast<int>(i) == p.lengths_region) continue;  // int32 lengths, written by the API, not a step
    EXPECT_EQ(static_cast<std::size_t>(touched[i]) * sizeof(float), p.workspace.regions[i].size)
        << p.workspace.regions[i].name;
  }
}

TEST_P(PlanTest, KernelsAreUniqueAndNamed) {
  const Plan p = plan();
  for (std::size_t i = 0; i < p.kernels.size(); ++i)
    for (std::size_t j = i + 1; j < p.kernels.size(); ++j) {
      EXPECT_FALSE(p.kernels[i] == p.kernels[j]);
      EXPECT_NE(kernel_name(p.kernels[i]), kernel_name(p.kernels[j]));
    }
}

TEST_P(PlanTest, PrintsAsTextAndJson) {
  const Plan p = plan();
  const std::string text = to_text(p);
  EXPECT_NE(text.find("workspace:"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(to_json(p));
  EXPECT_EQ(j["kernels"].size(), p.kernels.size());
  EXPECT_EQ(j["regions"].size(), p.workspace.regions.size());
  EXPECT_FALSE(j["steps"]["forward"].empty());
  EXPECT_EQ(j["steps"]["backward_data"].empty(), p.mode == Mode::inference);
  for (const auto& k : j["kernels"]) {
    EXPECT_TRUE(k.contains("name"));
    EXPECT_TRUE(k["descriptor"].contains("generator_version"));
  }
}

// The JSON descriptor of a gate kernel carries every field that changes its code, and the
// peephole gradients show as column sums with a factor.
TEST(PlanJson, DescriptorsNameTheFeatures) {
  RnnConfig c{.cell = CellKind::lstm, .input_size = 6, .hidden_size = 20};
  c.peephole = c.input_forget = true;
  c.gate_clip = 0.5f;
  c.clip = 2.0f;
  const nlohmann::json j = nlohmann::json::parse(to_json(make_plan(c, {3, 2}, Mode::training, Isa::avx512, 1)));
  int gates = 0;
  for (const auto& k : j["kernels"]) {
    const auto& d = k["descriptor"];
    if (d["kind"] != "gate") continue;
    ++gates;
    EXPECT_EQ(d["peephole"], true);
    EXPECT_EQ(d["input_forget"], true);
    EXPECT_FLOAT_EQ(d["gate_clip"].get<float>(), 0.5f);
    EXPECT_FLOAT_EQ(d["clip"].get<float>(), 2.0f);
    EXPECT_EQ(d["part"], 0);
  }
  EXPECT_EQ(gates, 2);  // forward (training) and backward
  int factored = 0;
  for (const auto& step : j["steps"]["backward_weights"])
    if (step["kind"] == "column_sum" && step.contains("factor")) ++factored;
  EXPECT_EQ(factored, 5);  // dP_i and dP_f (first step on c_init, then the rest), dP_o
}

INSTANTIATE_TEST_SUITE_P(Plans, PlanTest, testing::ValuesIn(cases()), [](const auto& info) {
  const PlanCase& c = info.param;
  return fmt::format("{}_i{}_h{}_l{}_d{}_t{}_n{}_{}_{}_th{}{}{}", to_string(c.cell), c.I, c.H, c.L, c.bi ? 2 : 1, c.T,
                     c.N, c.mode == Mode::training ? "train" : "infer", to_string(c.isa), c.threads,
                     c.fpmath == FpMath::bf16 ? "_bf16" : "", c.quantize == Quantize::int8_dynamic ? "_int8" : "");
});

TEST(Planner, RejectsBadInput) {
  const RnnConfig ok{CellKind::lstm, 4, 4, 1, false};
  EXPECT_THROW(make_plan(ok, {0, 1}, Mode::inference, Isa::avx512), Error);
  EXPECT_THROW(make_plan(ok, {1, -2}, Mode::inference, Isa::avx512), Error);
  EXPECT_THROW(make_plan(ok, {1, 1}, Mode::inference, Isa::detect), Error);
  EXPECT_THROW(make_plan(ok, {1, 1}, Mode::inference, Isa::avx512, 0), Error);
  EXPECT_THROW(make_plan({CellKind::lstm, 0, 4, 1, false}, {1, 1}, Mode::inference, Isa::avx512), Error);
  EXPECT_THROW(make_plan(ok, {1, 1}, Mode::inference, Isa::avx512, 1, {}, {512, 1024 * 1024}), Error);
  EXPECT_THROW(make_plan(ok, {1, 1}, Mode::inference, Isa::avx512, 1, {}, {48 * 1024, 32 * 1024}), Error);
  EXPECT_THROW(make_plan(ok, {1, 1}, Mode::inference, Isa::avx512, 1, {}, {48 * 1024, std::int64_t{1} << 40}), Error);
}

// Whether a two-thread inference plan for these caches runs a bidirectional layer's directions
// in turn (one lane in every forward stage) rather than as two lanes at once.
bool directions_take_turns(const RnnConfig& config, Shape shape, const CacheSizes& caches) {
  const Plan p = make_plan(config, shape, Mode::inference, Isa::avx512, 2, {}, caches);
  EXPECT_EQ(p.caches, caches);
  EXPECT_EQ(p.threads, 2);
  std::size_t most_lanes = 0;
  for (const Stage& stage : p.forward) most_lanes = std::max(most_lanes, stage.lanes.size());
  return most_lanes == 1;
}

// The directions of a bidirectional layer take turns, each on both threads, exactly where a
// direction's W_hh overflows three quarters of one core's L2 and the batch has 4 rows or fewer
// (the steps wait on W_hh from L3); with more rows they stay lanes also where only half of W_hh
// fits; the plan is made for the caches it is given. LSTM H=320: W_hh is 1.6 MB.
TEST(Planner, DirectionsTakeTurnsWhereWhhOverflowsL2AndRowsAreFew) {
  const RnnConfig config{CellKind::lstm, 16, 320, 1, true};
  for (const auto& [l2, batch, in_turn] :
       {std::tuple{1024 * 1024, 8, false}, {1024 * 1024, 5, false}, {1024 * 1024, 4, true}, {1024 * 1024, 1, true},
        {2048 * 1024, 4, true}, {2048 * 1024, 5, false}, {2048 * 1024, 47, false}, {4096 * 1024, 8, false},
        {4096 * 1024, 1, false}}) {
    EXPECT_EQ(directions_take_turns(config, {50, batch}, {48 * 1024, l2}), in_turn) << "L2 " << l2 << " N " << batch;
  }
}

// Up to 8 rows, two directions whose W_hh are each over a quarter of the L3 take turns too: as
// lanes, L3 would stream both at once.
TEST(Planner, DirectionsTakeTurnsWhereTheirWeightsCrowdTheL3) {
  const RnnConfig config{CellKind::lstm, 1024, 1024, 1, true};  // W_hh 16 MiB a direction, L3/4 at 64
  for (const auto& [l3, batch, in_turn] :
       {std::tuple{32 << 20, 6, true}, {32 << 20, 8, true}, {32 << 20, 9, false}, {32 << 20, 20, false},
        {60 << 20, 8, true}, {64 << 20, 8, false}, {128 << 20, 6, false}, {128 << 20, 4, true}}) {
    EXPECT_EQ(directions_take_turns(config, {10, batch}, {32 * 1024, 1024 * 1024, 8 << 20, l3}), in_turn)
        << "L3 " << l3 << " N " << batch;
  }
}

// Small problems run on one thread unless their weights are large (then they stream them).
TEST(Planner, SmallProblemsRunOnOneThread) {
  EXPECT_EQ(make_plan({CellKind::lstm, 7, 8, 1, false}, {3, 2}, Mode::inference, Isa::avx512, 2).threads, 1);
  EXPECT_EQ(make_plan({CellKind::lstm, 800, 800, 1, false}, {300, 20}, Mode::inference, Isa::avx512, 2).threads, 2);
  // 12 MFLOP, 24 MB of weights; 0.1 MFLOP, 0.5 MB; training moves 1 MB of weights three times.
  EXPECT_EQ(make_plan({CellKind::lstm, 500, 1000, 2, false}, {1, 1}, Mode::inference, Isa::avx512, 2).threads, 2);
  EXPECT_EQ(make_plan({CellKind::lstm, 128, 128, 1, false}, {1, 4}, Mode::inference, Isa::avx512, 2).threads, 1);
  EXPECT_EQ(make_plan({CellKind::gru, 200, 200, 1, false}, {2, 2}, Mode::training, Isa::avx512, 2).threads, 2);
  EXPECT_EQ(make_plan({CellKind::gru, 200, 200, 1, false}, {2, 2}, Mode::inference, Isa::avx512, 2).threads, 1);
}

// The work that decides is the whole call's: layers above a narrow x take the wider output of
// the layer below. LSTM I=7 H=160 T=7 N=3 training: 13 MFLOP in its first layer, 26 more in
// each layer above.
TEST(Planner, EveryLayersWorkCountsTowardsTwoThreads) {
  const auto threads = [](std::int64_t layers) {
    return make_plan({CellKind::lstm, 7, 160, layers, false}, {7, 3}, Mode::training, Isa::avx512, 2).threads;
  };
  EXPECT_EQ(threads(1), 1);
  EXPECT_EQ(threads(2), 2);
  EXPECT_EQ(threads(3), 2);
}

// One direction whose time steps are small runs on one thread however long its sequence: its
// steps would be split by hidden units with a barrier after each (too few rows to split by
// rows). Two directions (a lane each) and larger steps keep both threads.
TEST(Planner, SmallTimeStepsOfOneDirectionRunOnOneThread) {
  const auto threads = [](CellKind cell, std::int64_t I, std::int64_t H, bool bi, std::int64_t T, std::int64_t N) {
    return make_plan({cell, I, H, 1, bi}, {T, N}, Mode::inference, Isa::avx512, 2).threads;
  };
  EXPECT_EQ(threads(CellKind::gru, 40, 40, false, 500, 4), 1);  // 38 MFLOP, 77 KFLOP a step
  EXPECT_EQ(threads(CellKind::lstm, 32, 32, false, 200, 8), 1);
  EXPECT_EQ(threads(CellKind::gru, 40, 40, true, 500, 4), 2);
  EXPECT_EQ(threads(CellKind::lstm, 64, 64, false, 200, 4), 2);   // 262 KFLOP a step
  EXPECT_EQ(threads(CellKind::lstm, 1024, 32, false, 200, 8), 2);  // 2.2 MFLOP a step, mostly input
}

// An AVX2 plan generates every kernel for AVX2, sized to its 16 ymm registers (gate unrolls,
// GEMM tiles: gemm_max_rows), says so, and runs bf16 GEMMs as FP32 (no bf16 unit on AVX2).
TEST(Planner, AvxTwoGeneratesKernelsWithinItsRegistersAndSaysSo) {
  for (CellKind cell : kCellKinds)
    for (Mode mode : {Mode::inference, Mode::training}) {
      const Plan p = make_plan({cell, 64, 100, 2, true}, {5, 20}, mode, Isa::avx2, 2, {}, {}, FpMath::bf16);
      EXPECT_EQ(p.fpmath, FpMath::strict);
      const std::string text = to_text(p);
      EXPECT_NE(text.find("isa avx2: ymm kernels in 16 registers"), std::string::npos) << text;
      EXPECT_NE(text.find("fpmath bf16: isa avx2 has no bf16 GEMM"), std::string::npos) << text;
      int gates = 0, gemms = 0;
      for (const KernelDesc& k : p.kernels) {
        EXPECT_EQ(k.isa_kind(), Isa::avx2) << kernel_name(k);
        EXPECT_NE(kernel_name(k).find("_avx2_"), std::string::npos) << kernel_name(k);
        if (k.kind_of() == KernelKind::gate) {
          ++gates;
          EXPECT_LE(static_cast<int>(k.unroll), max_gate_unroll(cell, k.pass_kind(), Isa::avx2)) << kernel_name(k);
        } else {
          ASSERT_EQ(k.kind_of(), KernelKind::gemm) << kernel_name(k);
          ++gemms;
          EXPECT_LE(static_cast<int>(k.rows), gemm_max_rows(k.vectors, Isa::avx2)) << kernel_name(k);
        }
      }
      EXPECT_GT(gates, 0);
      EXPECT_GT(gemms, 0);
    }
  // The tiles differ from AVX-512's, and so does the plan's cache key (its isa).
  const Plan avx512 = make_plan({CellKind::lstm, 800, 800, 1, false}, {30, 20}, Mode::inference, Isa::avx512, 2);
  const Plan avx2 = make_plan({CellKind::lstm, 800, 800, 1, false}, {30, 20}, Mode::inference, Isa::avx2, 2);
  EXPECT_NE(to_json(avx512), to_json(avx2));
  EXPECT_NE(to_text(avx2).find("isa=avx2"), std::string::npos);
}

// (A batch of 12 rows is too few to split by rows on two threads or more: see below.)
TEST(Planner, ThreadsSplitHiddenUnitsWithoutGapsOrOverlap) {
  for (std::int64_t H : {1, 17, 100, 800})
    for (int threads : {1, 2, 3, 8}) {
      const Plan p = make_plan({CellKind::lstm, 7, H, 1, false}, {300, 12}, Mode::inference, Isa::avx512, threads);
      if (H >= 100) {
        EXPECT_EQ(p.threads, threads) << "big enough to split";
      }
      for (const Step& s : p.forward[0].lanes[0])
        if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
          std::int64_t next = 0;
          ASSERT_EQ(r->gate.thread_kernels.size(), static_cast<std::size_t>(p.threads));
          for (int t = 0; t < p.threads; ++t) {
            const auto [c0, c1] = r->gemm.blocking.thread_columns(t);
            EXPECT_EQ(c0, next);
            next = c1;
            if (c1 > c0) {
              EXPECT_EQ(p.kernels[static_cast<std::size_t>(r->gate.thread_kernels[t])].cols, c1 - c0);
            }
          }
          EXPECT_EQ(next, H);
        }
    }
}

// The batch rows of the recurrences' lanes in `stages` (forward or backward data), in lane
// order, checking what each lane's steps cover; empty when no recurrence is split by rows.
std::vector<std::pair<std::int64_t, std::int64_t>> row_slices(const Plan& p, const std::vector<Stage>& stages) {
  std::vector<std::pair<std::int64_t, std::int64_t>> slices;
  for (const Stage& stage : stages)
    for (const auto& lane : stage.lanes)
      for (const Step& s : lane)
        if (const auto* r = std::get_if<RecurrenceStep>(&s); r && r->batch < p.shape.batch) {
          EXPECT_EQ(stage.lanes.size(), static_cast<std::size_t>(p.threads));
          EXPECT_EQ(r->gemm.blocking.threads, 1) << "a lane's GEMM runs on its one thread";
          EXPECT_EQ(r->gemm.m, r->batch);
          EXPECT_EQ(p.kernels[static_cast<std::size_t>(r->gate.thread_kernels.at(0))].rows, r->batch);
          EXPECT_EQ(p.kernels[static_cast<std::size_t>(r->gate.thread_kernels.at(0))].cols, p.config.hidden_size);
          slices.emplace_back(r->batch_begin, r->batch_begin + r->batch);
        }
  return slices;
}

// A direction's recurrence runs as lanes of batch rows, a thread each (one direction on all
// threads, two on half of them each), forward and backward, exactly where each lane has at
// least 8 rows and W_hh is at most 5/4 of one core's L2 (or 8 L2s, with at least 48 rows a
// lane); the lanes' rows cover the batch
// without gaps or overlap.
TEST(Planner, RecurrenceSplitsByRowsWhereWhhAboutFitsL2) {
  const CacheSizes caches{48 * 1024, 2048 * 1024};
  struct Case {
    RnnConfig config;
    std::int64_t batch;
    int threads;
    CacheSizes caches;
    bool rows;
  };
  const Case cases[] = {
      {{CellKind::lstm, 64, 128, 1, false}, 64, 2, caches, true},   // W_hh 256 KiB
      {{CellKind::lstm, 64, 256, 1, false}, 33, 2, caches, true},   // 1 MiB
      {{CellKind::gru, 64, 100, 2, false}, 50, 3, caches, true},
      {{CellKind::gru, 64, 467, 1, false}, 64, 2, caches, true},    // W_hh just under 5/4 of L2
      {{CellKind::lstm, 64, 128, 1, false}, 15, 2, caches, false},  // 7 rows a thread
      {{CellKind::gru, 64, 468, 1, false}, 64, 2, caches, false},   // W_hh over 5/4 of L2
      {{CellKind::lstm, 64, 512, 1, false}, 96, 2, caches, true},   // 4 MiB, but 48 rows a thread
      {{CellKind::lstm, 64, 512, 1, false}, 94, 2, caches, false},  // ... 47
      {{CellKind::lstm, 64, 1025, 1, false}, 96, 2, caches, false}, // over 8 L2s
      {{CellKind::lstm, 64, 128, 1, false}, 64, 2, {48 * 1024, 192 * 1024}, false},  // W_hh 4/3 of L2
      {{CellKind::lstm, 64, 128, 1, true}, 64, 2, caches, false},   // two directions: a lane each
      {{CellKind::lstm, 64, 128, 1, true}, 64, 3, caches, false},
      {{CellKind::lstm, 64, 128, 2, true}, 64, 4, caches, true},    // two lanes of rows per direction
      {{CellKind::lstm, 64, 128, 1, false}, 64, 1, caches, false},
  };
  for (const Case& c : cases)
    for (Mode mode : {Mode::inference, Mode::training}) {
      const Plan p = make_plan(c.config, {20, c.batch}, mode, Isa::avx512, c.threads, {}, c.caches);
      SCOPED_TRACE(fmt::format("{} N={} threads={} L2={}", describe(c.config), c.batch, c.threads, c.caches.l2));
      const auto slices = row_slices(p, p.forward);
      EXPECT_EQ(row_slices(p, p.backward_data), mode == Mode::training ? slices : decltype(slices){});
      if (!c.rows) {
        EXPECT_TRUE(slices.empty());
        continue;
      }
      ASSERT_EQ(slices.size(), static_cast<std::size_t>(c.threads * c.config.num_layers));
      std::int64_t next = 0;
      for (const auto& [n0, n1] : slices) {
        EXPECT_EQ(n0, next);
        EXPECT_GE(n1 - n0, 8);
        next = n1 == c.batch ? 0 : n1;
      }
      EXPECT_EQ(next, 0);
    }
}

// The lanes of one direction's batch rows multiply by the same weights in the same panels: they
// read one packed copy (each thread then streams the same lines from L3, which holds half as
// much), and the weights are packed once each. LSTM with a projection (W_hh and W_hr), the
// reset-before GRU (W_hh's r,z and n rows apart), bf16, two directions on four threads.
TEST(Planner, LanesOfBatchRowsShareTheirPackedWeights) {
  const CacheSizes caches{48 * 1024, 2048 * 1024};
  RnnConfig projected{CellKind::lstm, 64, 256, 1, false};
  projected.proj_size = 128;
  const std::tuple<RnnConfig, int, FpMath> cases[] = {
      {{CellKind::lstm, 64, 128, 1, false}, 2, FpMath::strict},
      {projected, 2, FpMath::strict},
      {{CellKind::gru_reset_before, 64, 200, 2, false}, 2, FpMath::strict},
      {{CellKind::gru, 64, 128, 2, true}, 4, FpMath::strict},
      {{CellKind::lstm, 64, 128, 1, false}, 2, FpMath::bf16},
  };
  for (const auto& [config, threads, fpmath] : cases) {
    const Plan p = make_plan(config, {20, 64}, Mode::inference, Isa::avx512, threads, {}, caches, fpmath);
    SCOPED_TRACE(fmt::format("{} threads={} {}", describe(config), threads, to_string(fpmath)));
    ASSERT_FALSE(row_slices(p, p.forward).empty());
    std::vector<Operand> sources;
    test::for_each_step(p.pack_weights, [&](const Step& s) {
      if (const auto* pack = std::get_if<PackStep>(&s)) {
        EXPECT_EQ(std::count(sources.begin(), sources.end(), pack->src), 0) << pack->what << " packed twice";
        sources.push_back(pack->src);
      }
    });
    // Each (layer, direction): every lane's recurrent GEMMs read the same panels.
    std::map<std::pair<std::int64_t, int>, std::vector<Operand>> panels;
    test::for_each_step(p.forward, [&](const Step& s) {
      if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
        const std::vector<Operand> b{r->gemm.b, r->reset_before ? r->reset_before->gemm.b : Operand{},
                                     r->projection ? r->projection->gemm.b : Operand{}};
        auto [it, first] = panels.emplace(std::pair{r->layer, r->direction}, b);
        if (!first) {
          EXPECT_TRUE(it->second == b) << r->what;
        }
      }
    });
    EXPECT_EQ(panels.size(), static_cast<std::size_t>(config.num_layers * config.directions()));
  }
}

}  // namespace
}  // namespace rnnjit

namespace rnnjit {
namespace {

// Two directions run as lanes, a thread each, only for their recurrences: each layer's two
// input projections come first in a stage of one lane on all threads, and the weight
// gradients run in one lane too, every GEMM shared by all threads.
TEST(Planner, LanesHoldOnlyTheRecurrences) {
  const Plan p = make_plan({CellKind::lstm, 800, 800, 2, true}, {300, 20}, Mode::training, Isa::avx512, 2);
  ASSERT_EQ(p.threads, 2);
  ASSERT_EQ(p.forward.size(), 5u);  // per layer: projections, lanes; then the outputs
  for (int l = 0; l < 2; ++l) {
    const Stage& projections = p.forward[static_cast<std::size_t>(2 * l)];
    ASSERT_EQ(projections.lanes.size(), 1u);
    ASSERT_EQ(projections.lanes[0].size(), 2u);
    for (const Step& s : projections.lanes[0]) {
      const auto* g = std::get_if<GemmStep>(&s);
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(g->blocking.threads, 2) << g->what;
    }
    const Stage& lanes = p.forward[static_cast<std::size_t>(2 * l + 1)];
    ASSERT_EQ(lanes.lanes.size(), 2u);
    for (const auto& lane : lanes.lanes)
      for (const Step& s : lane) EXPECT_EQ(std::get_if<GemmStep>(&s), nullptr) << "a one-shot GEMM in a lane";
  }
  for (const Stage& stage : p.backward_weights) {
    ASSERT_EQ(stage.lanes.size(), 1u);
    for (const Step& s : stage.lanes[0])
      if (const auto* g = std::get_if<GemmStep>(&s)) {
        EXPECT_EQ(g->blocking.threads, 2) << g->what;
      }
  }
}

// The input projection groups its columns by gate only where H is a whole number of vectors;
// otherwise the G gates are one group, so that only the last of all its vectors is partial.
TEST(Planner, InputProjectionPadsOnlyItsLastVector) {
  for (std::int64_t H : {50, 64, 100, 800}) {
    const Plan p = make_plan({CellKind::gru, 1024, H, 1, false}, {100, 100}, Mode::inference, Isa::avx512, 2);
    const GemmStep* projection = nullptr;
    for (const Step& s : p.forward[0].lanes[0])
      if (const auto* g = std::get_if<GemmStep>(&s); g && g->what.starts_with("input projection")) projection = g;
    ASSERT_NE(projection, nullptr);
    const GemmBlocking& k = projection->blocking;
    EXPECT_EQ(k.group, H % 16 == 0 ? H : 3 * H) << "H=" << H;
    // Columns the kernels compute: full panels, then the last panel's vectors of each group.
    const std::int64_t full = (k.panels_per_group() - 1) * k.panel_columns();
    const std::int64_t computed = 3 * H / k.group * (full + (k.group - full + 15) / 16 * 16);
    if (H % 16 != 0) {
      EXPECT_LT(computed - 3 * H, 16) << "H=" << H << ": more than the last vector padded";
    }
  }
}

// The weight gradients copy their transposed A (the gate gradients) into panels on cores of two
// 512-bit FMAs a cycle; on Zen 4 (one) they read it in place where a k block of its rows spans
// no more than the TLB maps, and copy it where it spans more: the DS2 LSTM's k block of 1638
// rows 3200 floats apart spans 21 MB, LSTM H=128's (rows 512 floats apart) 3.4 MB; the kernels'
// strides say where A's rows and k steps lie.
TEST(Planner, WeightGradientsReadTheirTransposedAInPlaceOnlyAtHalfTheFmaRateWithinTheTlbReach) {
  CacheSizes zen4;  // 2 MiB of L2 (k_c = 1638), 8 MiB of TLB reach, as the defaults
  zen4.zmm_fmas_per_cycle = 1;
  for (const auto& [caches, H, in_place] : {std::tuple{zen4, 800, false}, {zen4, 128, true},
                                            {CacheSizes{}, 800, false}, {CacheSizes{}, 128, false}}) {
    const std::string what = fmt::format("H={} FMAs a cycle {}", H, caches.zmm_fmas_per_cycle);
    const Plan p = make_plan({CellKind::lstm, H, H, 1, false}, {100, H == 800 ? 20 : 64}, Mode::training,
                             Isa::avx512, 2, {}, caches);
    int dw = 0;
    test::for_each_step(p.backward_weights, [&](const Step& s) {
      const auto* g = std::get_if<GemmStep>(&s);
      if (!g || !g->trans_a) return;
      ++dw;
      EXPECT_EQ(g->blocking.pack_a, !in_place) << g->what << " " << what;
      const KernelDesc& d = p.kernels.at(static_cast<std::size_t>(g->blocking.kernels[0][0][0]));
      EXPECT_EQ(d.a_row_stride, 1u) << g->what;
      EXPECT_EQ(d.a_k_stride, in_place ? static_cast<std::uint32_t>(g->lda) : static_cast<std::uint32_t>(g->blocking.m_r))
          << g->what << " " << what;
    });
    EXPECT_EQ(dw, 2) << "dW_ih and dW_hh, " << what;
  }
}

// An input projection larger than the threads' L2 writes its gates with streaming stores
// (GemmBlocking::stream_c), its tiles' rows whole vectors also where G*H is not (gx's rows are
// padded to them, the last tile writing zeros there); a small one, whose gates the recurrence
// then reads from L2, does not, and neither does any recurrent GEMM.
TEST(Planner, OnlyLargeAlignedProjectionsStreamTheirOutput) {
  for (const auto& [H, T, N] : {std::tuple{50, 100, 100}, {64, 100, 100}, {100, 100, 100}, {800, 100, 100},
                                {64, 10, 10}}) {
    const Plan p = make_plan({CellKind::gru, 1024, H, 1, false}, {T, N}, Mode::training, Isa::avx512, 2);
    const std::string what = fmt::format("H={} T={} N={}", H, T, N);
    const bool large = 4.0 * T * N * 3 * H > 2.0 * CacheSizes{}.l2;
    bool projection_seen = false;
    test::for_each_step(p, [&](const Step& s) {
      if (const auto* g = std::get_if<GemmStep>(&s)) {
        const bool projection = g->what.starts_with("input projection");
        projection_seen = projection_seen || projection;
        EXPECT_EQ(g->blocking.stream_c, projection && large) << what << ": " << g->what;
        if (projection) {
          EXPECT_EQ(g->ldc, (3 * H + 15) / 16 * 16) << what;
          EXPECT_EQ(g->c_whole_vectors, 3 * H % 16 != 0) << what;
        }
      } else if (const auto* r = std::get_if<RecurrenceStep>(&s)) {
        EXPECT_FALSE(r->gemm.blocking.stream_c) << what << ": " << r->what;
      }
    });
    EXPECT_TRUE(projection_seen) << what;
  }
}

}  // namespace
}  // namespace rnnjit
