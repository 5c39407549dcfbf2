#include "codegen/planner.hpp"

#include <algorithm>
#include <bit>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/plan_extents.hpp"
#include "codegen/x64/gate_emitter.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit {
namespace {

Operand region_operand(const WorkspacePlan& ws, int region, std::int64_t offset = 0) {
  static constexpr Buffer kBuffers[] = {Buffer::workspace, Buffer::reserve, Buffer::packed};
  return {kBuffers[static_cast<int>(ws.regions[static_cast<std::size_t>(region)].space)], region, offset};
}

Operand buffer_operand(Buffer b, std::int64_t offset = 0) { return {b, -1, offset}; }

// Below this much work per thread (GEMM FLOPs of the whole call, every layer's) a plan runs on
// one thread. Measured on 2 cores against one: 20-40 MFLOP plans were 10-25% faster on two
// threads, 10-16 MFLOP ones as fast or slower. (Counting the first layer only, as this rule
// once did, left multi-layer stacks over a narrow x on one thread: LSTM I=7 H=160 T=7 N=3,
// three layers, training, 13 of 65 MFLOP in the first layer, ran 1.5x faster on two threads,
// 0.82-0.87 of oneDNN -> 1.18-1.22; 36 other stacks of 2-4 layers it moved to two threads
// were 1.29x faster (geometric mean), the two slowest 0.92 (0.97 and 1.11 on a rerun).)
constexpr double kMinFlopsPerThread = 10e6;
// ... unless its first layer's weights are this large per thread: a few rows (T*N of 1-8) make
// the GEMMs weight-streaming bound, and two cores read memory nearly twice as fast as one
// (LSTM I=500 H=1000 T=1 N=1 inference, 12 MFLOP and 24 MB of weights: 7.0 ms on one thread,
// 0.47 of oneDNN).
constexpr double kMinWeightBytesPerThread = 1 << 20;
// Packed weights one core's L2 keeps from one time step to the next, beside h and the step's
// gate inputs: three quarters of it (1.5 MiB of a 2 MiB L2).
double l2_weight_bytes(const CacheSizes& caches) { return 0.75 * static_cast<double>(caches.l2); }
// Recurrent weights (W_hh, and W_hr) up to which a recurrence is split by batch rows (see the
// constructor): a little more than L2. Each thread then reads all of them at every step, the
// part past L2 from L3, but meets no other thread; split by units, each reads its share and
// waits at a barrier after every step. LSTM I=200 T=25-50, interleaved, rows against units:
// W_hh 1.6 MiB (H=320) 6-8% faster at N=16 and 64, inference and training; 2.0 MiB (H=360)
// 3-7%; 2.4 MiB (H=400) even at N=16, 3-5% faster at N=64; 4 MiB (H=512) 3-10% slower at
// N=16-32. Larger weights still split by rows where every thread has many rows: each byte of
// W_hh then serves enough FMAs that streaming all of it from L3 costs less than the barrier.
// (LSTM I=H=512 N=96 and 128, 4 MiB: 2-3% faster, inference and training; I=H=800 N=96 and
// 128, 10 MiB: 1-3%; GRU H=1024 N=96, 12 MiB, even; LSTM H=1024 N=64, 32 rows a thread: 1-3%
// slower.)
double row_split_weight_bytes(const CacheSizes& caches) { return 1.25 * static_cast<double>(caches.l2); }
constexpr std::int64_t kSliceRowsStreamingWeights = 48;
// Batch rows up to which two directions whose W_hh streams from L3 take turns on all threads
// rather than run as a lane each (see the constructor): each weight byte then serves at most 2
// FMAs, so a step is bound by how fast W_hh arrives, not by the FMAs.
constexpr std::int64_t kMaxRowsWeightBound = 4;
// And up to this many where one direction's W_hh is over a quarter of the L3: as two lanes, both
// directions' weights then stream through L3 at once and it keeps too little of them.
constexpr std::int64_t kMaxRowsSharingL3 = 8;
double l3_crowded_weight_bytes(const CacheSizes& caches) { return 0.25 * static_cast<double>(caches.l3); }
double row_split_streamed_weight_bytes(const CacheSizes& caches) { return 8.0 * static_cast<double>(caches.l2); }
// Plain B operands with fewer rows than this are read in place rather than packed.
constexpr std::int64_t kMinPackedK = 64;
// A transposed A (a weight gradient's gate gradients, A^T) is first copied, one k block at a
// time, into panels the tiles stream (GemmBlocking::pack_a): the copy is a pass over A read and
// written again, on memory's time, and a barrier per k block, after which a tile's k step loads
// m_r adjacent floats. Read in place, each k step loads a line of another row of A instead,
// a new 4 KiB page every k step or two, which the cores' prefetchers do not follow. On cores
// with two 512-bit FMAs a cycle that stalls the FMAs: on the Xeon VM (Sapphire Rapids class),
// copied against in place, the weight-gradient phases of a training call (dW_ih + dW_hh, best
// of two): LSTM I=H=512 T=50 N=64 104 -> 39 ms, LSTM I=H=256 N=64 38 -> 22, GRU I=H=256 N=32
// 14.2 -> 8.4, GRU I=33 H=384 N=64 two layers 56 -> 29, the DS2 RNN-tanh five layers
// bidirectional 690 -> 540, LSTM I=64 H=128 7.8 -> 5.2, RNN-tanh I=300 H=200 N=256 4.8 -> 4.3,
// RNN-relu I=1 H=1536 N=8 even (a software prefetch of A's line 8 k steps ahead recovered a
// third of the gap at most). At half that rate (Zen 4: CacheSizes::zmm_fmas_per_cycle 1) the
// loads hide behind the FMAs and in place wins where one k block of A's rows spans no more
// than the second-level TLB maps in 4 KiB pages (CacheSizes::tlb_reach), so the k steps hit
// the TLB even where the buffer has no huge pages (a caller's reserve). In place against
// copied there (best of five calls, interleaved): LSTM I=H=256 N=64 dW_ih 11.6-11.8 -> 8.8-9.3
// ms, LSTM I=64 H=128 N=64 dW_hh 5.8-9.9 -> 4.6-5.1 ms, GRU I=H=256 N=32 dW_hh 8.0-9.1 ->
// 6.3-6.7 ms (with and without huge pages), RNN-tanh I=300 H=200 N=256 dW_ih 4.3-4.6 -> 3.4-3.5
// ms; LSTM I=H=512 N=64 (a k block spans 6.5 MB) dW_ih 36-37 -> 33 ms. Past the TLB's reach:
// the DS2 LSTM (10.5 MB) even, LSTM I=H=1024 N=64 (13 MB) even with huge pages and 10-80%
// slower without.
bool copies_transposed_a(const GemmStep& g, std::int64_t k_c, const CacheSizes& caches) {
  if (!g.trans_a) return false;
  return caches.zmm_fmas_per_cycle > 1 || k_c * g.lda * static_cast<std::int64_t>(sizeof(float)) > caches.tlb_reach;
}
// Batch rows each thread needs before a recurrence is split by rows (see the constructor):
// fewer would leave the threads' GEMM tiles too short to keep the FMAs busy.
constexpr std::int64_t kMinSliceRows = 8;
// GEMM FLOPs a time step of one direction (input and recurrent products) must give each thread
// before the step is split by hidden units, the threads meeting at a barrier after every step.
// Measured on 2 cores, back-to-back calls, T=200-500, two threads against one: LSTM I=H=32 N=8
// (66 KFLOP a step a thread) 0.37 ms against 0.31, N=12 (98 K) 0.54 against 0.45, GRU I=H=40
// N=4 (38 K) 0.86 against 0.48; LSTM I=H=64 N=4 (131 K) 0.41 against 0.48, I=H=128 N=1 (131 K)
// 0.60 against 1.01.
constexpr double kMinStepFlopsPerThread = 100e3;

// Index of `d` in `kernels`, appended if new.
int append_kernel(std::vector<KernelDesc>& kernels, const KernelDesc& d);

// Everything the planner needs about one call, with the sizes named once.
struct Sizes {
  std::int64_t T, N, H, G, GH, D, L, R;  // R: reserve gate columns (reserve_gates * H)
  bool lstm, gru;
  bool reset_before = false;  // GRU with the reset before n's recurrent product (two kernels a step)
  std::int64_t S = 0, W = 0, P = 0;  // S: width of h (P or H); W = D*S: both directions' h side by side
  std::int64_t Y = 0;  // a row of y: W, or S with sum_directions
  std::int64_t B = 0;  // a row of a layer's output below the top (the input above): Y, or W for independent stacks
  std::int64_t GX = 0;  // a row of gx: G*H, or more (gx_row_floats)
};

class Planner {
 public:
  Planner(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads,
          const GemmChooser& projection_gemm, const CacheSizes& caches, FpMath fpmath)
      : config_(config),
        projection_gemm_(projection_gemm),
        layout_(config),
        plan_{config, shape, mode, isa, 1, caches, FpMath::strict, {}, {}, {}, -1, {}, {}, {}} {
    // OpenBLAS plans leave threading to OpenBLAS. Small problems run on one thread: waking the
    // workers costs tens of microseconds per stage, more than a few MFLOP of work or a few
    // hundred KB of weights read save. Training does three times the forward GEMMs' work, and
    // moves the weights three times too (packs them twice, writes their gradients): GRU I=H=200
    // T=2 N=2 training (1 MB of weights) ran 1.3x faster on two threads, LSTM I=H=128 T=1 N=4
    // inference (0.5 MB) up to 2x slower.
    // A time step's GEMM FLOPs in one direction of the first layer (input and recurrent products).
    const auto layer_step_flops = [&](std::int64_t l) {
      return 2.0 * static_cast<double>(shape.batch) * config.gates() * static_cast<double>(config.hidden_size) *
             static_cast<double>(config.layer_input_size(l) + config.state_size());
    };
    const double step_flops = layer_step_flops(0);
    // The whole call's GEMM FLOPs: layers above the first take the layer below's output, often
    // wider than x.
    double flops = 0;
    for (std::int64_t l = 0; l < config.num_layers; ++l)
      flops += layer_step_flops(l) * static_cast<double>(shape.seq_len) * config.directions() *
               (mode == Mode::training ? 3.0 : 1.0);
    // The first layer's weights (each layer reads its own, one layer after the other).
    const double weight_bytes =
        4.0 * static_cast<double>(config.directions()) *
        static_cast<double>(config.gates() * config.hidden_size * (config.input_size + config.state_size()) +
                            config.proj_size * config.hidden_size) *
        (mode == Mode::training ? 3.0 : 1.0);
    // And one direction with too few batch rows to split by rows (kMinSliceRows) and small time
    // steps runs on one thread: its steps would be split by hidden units, and the barrier after
    // each costs more than the half step it saves.
    const bool small_steps = config.directions() == 1 && shape.batch < kMinSliceRows * threads &&
                             step_flops < kMinStepFlopsPerThread * threads;
    plan_.threads = isa == Isa::avx512 && !small_steps &&
                            (flops >= kMinFlopsPerThread * threads || weight_bytes >= kMinWeightBytesPerThread * threads)
                        ? threads
                        : 1;
    const std::int64_t H = config.hidden_size;
    const int G = config.gates();
    s_ = {shape.seq_len, shape.batch, H, G, G * H, config.directions(), config.num_layers,
          (config.cell == CellKind::gru ? 4 : G) * H, config.cell == CellKind::lstm, config.cell == CellKind::gru};
    s_.reset_before = config.cell == CellKind::gru_reset_before;
    s_.S = config.state_size();
    s_.W = s_.D * s_.S;
    s_.Y = config.output_size();
    s_.B = config.layer_output_size(0);
    s_.P = config.proj_size;
    s_.GX = gx_row_floats(config, isa);
    dropout_ = mode == Mode::training && config.dropout > 0.0f && config.num_layers > 1;
    // Two directions run as two lanes at once, a thread each, unless a step's few rows
    // (kMaxRowsWeightBound) make it wait on W_hh streaming from L3 whatever the split: then the
    // directions take turns, each split across all threads, so the threads stream one
    // direction's W_hh, a share each, and L3 keeps one direction's weights, not both. On Zen 4
    // (1 MiB L2, 32 MiB L3), turns against lanes, interleaved: reset-before GRU I=129 H=1000
    // T=50 (12 MB of W_hh a direction) 1.6x faster at N=2 (0.72-0.82 of oneDNN -> 1.17-1.26) and
    // 1.5x at N=4, LSTM H=1024 N=4 1.4x, LSTM I=H=800 N=1 1.25x and N=4 1.17x, GRU I=512 H=1024
    // N=4 training 1.1-1.2x, LSTM H=800 N=2 training 7%, GRU H=512 N=2 (3 MB) 15%, RNN H=1024
    // N=4 (4 MB) even. Up to kMaxRowsSharingL3 rows they take turns too where a direction's
    // W_hh is over a quarter of the L3 (l3_crowded_weight_bytes): two lanes stream both
    // directions' weights through L3 at once, and it keeps little of either. On Zen 4 (32 MiB of
    // L3), turns against lanes, interleaved: LSTM I=H=1024 N=6 (16 MB a direction) 1.3x faster
    // (1.21 of oneDNN -> 1.76), RNN-tanh H=2048 N=6 1.45x (1.10 -> 1.60), N=8: GRU I=512 H=1024
    // (12 MB) inference and training 7-9%, LSTM H=1024 training 9%, LSTM H=800 (10 MB)
    // inference 3-7%, its training even; smaller weights not (LSTM H=640, 6.5 MB, N=7: lanes 3%
    // faster), nor more rows (LSTM H=800 N=10-12 training: lanes 2-5% faster; H=1024 N=16 even).
    // More rows keep their lanes also where a direction's W_hh is over what one core's L2 keeps
    // (l2_weight_bytes) but its half is not. They took turns there (4b549f5, before the steps
    // walked their panels in alternating order and prefetched the next panel into L2): now the
    // part of W_hh a lane streams from L3 costs less than turns' barrier every step and the
    // threads' uneven shares of units. On the Xeon VM (2 MiB L2), lanes against turns,
    // interleaved, three pairs each: DS2 RNN-tanh five layers bidirectional training (2.6 MB)
    // 0-4% faster (its recurrences 4%), one layer T=100 N=20 inference and training 2-5%, GRU
    // I=H=400 N=20 (1.9 MB) 5-7%, LSTM I=H=400 N=8 (2.6 MB) 0-4% and N=32 training 2-5%, LSTM
    // I=H=384 N=16 training 4-5%, GRU I=256 H=480 N=8 (2.8 MB) 1-6%, RNN-tanh I=256 H=700 N=8
    // 10-14%, RNN-relu I=16 H=768 N=8 9-10%.
    const double w_hh_bytes = 4.0 * static_cast<double>(s_.GH) * static_cast<double>(s_.S);
    const bool weight_bound = s_.N <= kMaxRowsWeightBound ||
                              (s_.N <= kMaxRowsSharingL3 && w_hh_bytes > l3_crowded_weight_bytes(caches));
    split_directions_ =
        s_.D == 2 && plan_.threads > 1 && w_hh_bytes > l2_weight_bytes(caches) && weight_bound;
    // A recurrence is split by batch rows rather than by hidden units where its recurrent
    // weights are at most a little over one core's L2 (row_split_weight_bytes), or not many
    // times larger and every thread gets at least 48 rows (see there), a lane of rows
    // per thread: one direction's rows over all threads, or each of two directions' over half
    // of them (they are otherwise a lane each, and threads beyond two would idle). Rows are
    // independent, so each thread then runs the whole time loop on its rows without meeting
    // the others after every step, and no h crosses between cores. A split by units makes every
    // step wait for the slower core (on a shared VM's vCPUs one is often 10-50% slower for
    // milliseconds) and, where H is a few vectors, gives the threads unequal shares (H=50: 32
    // and 18 units). Larger weights keep the split by units, in which each thread streams only
    // its share. (GRU H=300, W_hh 1.05 MiB, N=64 inference: 0.87-0.91 of oneDNN split by units,
    // 0.99-1.01 by rows.)
    const double recurrent_bytes = 4.0 * static_cast<double>(s_.GH * s_.S + s_.P * s_.H);
    const int slices = plan_.threads / static_cast<int>(s_.D);
    const bool rows_split =
        isa == Isa::avx512 && slices > 1 && s_.N >= kMinSliceRows * slices &&
        (recurrent_bytes <= row_split_weight_bytes(caches) ||
         (s_.N >= kSliceRowsStreamingWeights * slices && recurrent_bytes <= row_split_streamed_weight_bytes(caches)));
    batch_slices_ = rows_split ? slices : 1;
    a_panels_.assign(static_cast<std::size_t>(s_.D * batch_slices_), -1);
    b_panels_ = a_panels_;
    if (fpmath == FpMath::bf16) {
      if (isa != Isa::avx512)
        plan_.notes.push_back(fmt::format("fpmath bf16: isa {} has no AMX GEMM, every GEMM stays FP32", to_string(isa)));
      else if (mode == Mode::training)
        plan_.notes.push_back("fpmath bf16 applies to inference: training's GEMMs stay FP32");
      else
        plan_.fpmath = FpMath::bf16;
    }
  }

  Plan build() {
    const Mode mode = plan_.mode;
    if (plan_.isa == Isa::avx2)
      plan_.notes.push_back("isa avx2 has no gate-kernel emitter: the plan uses the reference gate kernels");
    if (plan_.isa == Isa::reference) plan_.notes.push_back("isa reference: scalar gate kernels");
    if (plan_.isa != Isa::avx512) plan_.notes.push_back("GEMMs run on OpenBLAS (no generated GEMM for this isa)");
    allocate_forward();
    plan_forward();
    plan_outputs();
    if (mode == Mode::training) {
      allocate_backward();
      plan_dy();
      plan_backward_data();
      plan_backward_weights();
    }
    overlay_workspace_of_calls(plan_);
    return std::move(plan_);
  }

 private:
  int region(const std::string& name, bool reserve, std::int64_t elements) {
    return plan_.workspace.add(name, reserve ? Space::reserve : Space::workspace,
                               static_cast<std::size_t>(elements) * sizeof(float));
  }

  bool training() const { return plan_.mode == Mode::training; }
  Operand weight(std::int64_t l, int d, ParamKind k) const {
    return buffer_operand(Buffer::weights, layout_.block(l, d, k).offset);
  }
  // b_ih or b_hh of layer l, direction d: zeros where the network has no biases.
  Operand bias(std::int64_t l, int d, ParamKind k) const {
    return config_.bias ? weight(l, d, k) : region_operand(plan_.workspace, zero_bias_);
  }
  Operand dweight(std::int64_t l, int d, ParamKind k, std::int64_t row = 0, std::int64_t ld = 0) const {
    return buffer_operand(Buffer::dweights, layout_.block(l, d, k).offset + row * ld);
  }

  // --- generated GEMMs ---------------------------------------------------------------------
  bool generate_gemms() const { return plan_.isa == Isa::avx512; }
  // Threads that split the steps of a lane: all of them when a stage has a single lane.
  int lane_threads() const { return s_.D == 1 || split_directions_ ? plan_.threads : 1; }
  // A direction's steps as a lane of its own, or (split_directions_, in_turn) after the other's.
  void add_lane(Stage& stage, std::vector<Step>&& lane, bool in_turn = false) const {
    if ((split_directions_ || in_turn) && !stage.lanes.empty()) {
      for (Step& step : lane) stage.lanes.front().push_back(std::move(step));
    } else {
      stage.lanes.push_back(std::move(lane));
    }
  }

  int add_kernel_desc(const KernelDesc& d) { return append_kernel(plan_.kernels, d); }

  // Batch rows [first, second) of lane i of a direction split by rows (batch_slices_ lanes).
  std::pair<std::int64_t, std::int64_t> batch_slice(int i) const {
    return {s_.N * i / batch_slices_, s_.N * (i + 1) / batch_slices_};
  }

  // Chooses the tiling of a GEMM over column groups of `group` and registers its kernels.
  // `recurrent`: the GEMM runs at every time step with the same B, each thread on its panels.
  // With `pack_into`, a plain B (a row-major matrix whose rows are far apart) is first copied
  // into panels by a PackStep appended there, so the microkernel streams it instead of touching
  // a page per k step.
  // `own_panels`: B's panels get a region of their own (the GEMM runs interleaved with another
  // packed one of the lane, as the two GEMMs of a recurrence with a projection do).
  GemmStep generated(GemmStep g, std::int64_t group, int threads = 0, bool recurrent = false, int lane = 0,
                     std::vector<Step>* pack_into = nullptr, bool own_panels = false) {
    if (!generate_gemms()) return g;
    const bool pack_b = pack_into && !g.blocking.packed_b && g.k >= kMinPackedK;
    g.blocking.packed_b = g.blocking.packed_b || pack_b;
    g = plan_generated_gemm(std::move(g), group, threads ? threads : lane_threads(), plan_.kernels, recurrent,
                            plan_.caches);
    const auto lane_index = static_cast<std::size_t>(lane);
    // (Panels that two GEMMs may share get their region from share_a_panels().)
    if (g.blocking.pack_a && g.a_panels_use == GemmStep::APanels::per_k_block)
      g.a_panels = region_operand(plan_.workspace,
                                  lane_region(a_panels_.at(lane_index), "a_panels", lane, a_panel_elements(g)));
    if (pack_b) {
      const std::int64_t elements = packed_elements(g.blocking, g.n / group, g.k);
      const Operand panels = region_operand(
          plan_.workspace, own_panels ? region(fmt::format("b_panels.{}", g.what), false, elements)
                                      : lane_region(b_panels_.at(lane_index), "b_panels", lane, elements));
      pack_into->push_back(PackStep{"pack B of " + g.what, g.b, panels, g.k, g.n / group, g.blocking, false, g.ldb,
                                    g.finished_k_rows_skipped ? g.sequences : 0});
      g.b = panels;
      g.ldb = g.blocking.panel_columns();
    }
    return g;
  }

  // A scratch region per lane (lanes run at once) shared by the lane's GEMMs, which run in turn:
  // grown (as a new region) when a GEMM needs more than the current one holds.
  int lane_region(int& region, const char* what, int lane, std::int64_t elements) {
    if (region < 0 || plan_.workspace.regions[static_cast<std::size_t>(region)].size <
                          static_cast<std::size_t>(elements) * sizeof(float))
      region = this->region(fmt::format("{}.lane{}.{}", what, lane, plan_.workspace.regions.size()), false, elements);
    return region;
  }

  // A forward GEMM whose B is W^T: the weights are packed once into panels, grouped by gate
  // (`groups` column groups of `group`: G of H for W_ih and W_hh, one of P for W_hr).
  // `threads`: the threads that share it (0: the lane's); `lane`: whose scratch (bf16 A panels)
  // it uses, distinct for GEMMs that run at once. GEMMs on the same weights in the same panels
  // (a direction's lanes of batch rows) share one packed copy: each thread then streams the
  // same lines from L3, which holds half as many bytes of weights.
  GemmStep with_packed_weights(GemmStep g, const std::string& name, bool recurrent, std::int64_t group = 0,
                               std::int64_t groups = 0, int threads = 0, int lane = 0) {
    if (!generate_gemms()) return g;
    if (group == 0) group = s_.H, groups = s_.G;
    g.blocking.packed_b = true;
    g.blocking.bf16 = plan_.fpmath == FpMath::bf16;
    g = generated(g, group, threads, recurrent, lane);
    const PackedWeights key{g.b, g.k, groups, group, g.blocking.n_r, g.blocking.bf16, g.blocking.cuts(), -1};
    auto same = std::find_if(packed_weights_.begin(), packed_weights_.end(),
                             [&](const PackedWeights& p) { return p.same_panels(key); });
    if (same == packed_weights_.end()) {
      // Other panels of the same weights (lanes of batch rows whose tiles differ) get a name of their own.
      const bool named = std::any_of(packed_weights_.begin(), packed_weights_.end(),
                                     [&](const PackedWeights& p) { return p.src == key.src; });
      const int packed = plan_.workspace.add(
          "packed." + name + (named ? fmt::format(".n_r{}{}", key.n_r, cuts_suffix(key.cuts)) : ""), Space::packed,
          static_cast<std::size_t>(packed_elements(g.blocking, groups, g.k)) * sizeof(float));
      const Operand dst = region_operand(plan_.workspace, packed);
      plan_.pack_weights.push_back(Stage{{{PackStep{"pack " + name, g.b, dst, g.k, groups, g.blocking}}}});
      packed_weights_.push_back(key);
      packed_weights_.back().region = packed;
      same = packed_weights_.end() - 1;
    }
    g.b = region_operand(plan_.workspace, same->region);
    g.ldb = g.blocking.panel_columns();
    return g;
  }

  // An input projection on the generated GEMM with W_ih packed, or on OpenBLAS (W_ih read in
  // place) where the caller's chooser says so.
  GemmStep input_projection(GemmStep g, const std::string& name, std::int64_t group, std::int64_t groups,
                            int threads) {
    if (generate_gemms() && projection_gemm_) {
      GemmChoice choice = projection_gemm_(g, group, threads);
      if (!choice.why.empty()) plan_.notes.push_back(fmt::format("{}: {}", g.what, choice.why));
      if (choice.openblas) return g;
    }
    return with_packed_weights(g, name, false, group, groups, threads);
  }

  // Layer 0 of a batch-first call projects x where it lies, its [N, T] rows in order, so that
  // its gx is batch-major: step t's row n at (n * T + t) * GX, which the layer's gate kernels
  // read T*GX apart (a stride they add as a 32-bit immediate: beyond it, x is copied instead).
  // Only what reads x as sequence-major rows then copies it (backward weights; plan_input()).
  bool batch_major_gx(std::int64_t l) const {
    return l == 0 && config_.batch_first && s_.T * s_.GX * 4 <= std::numeric_limits<std::int32_t>::max();
  }
  // The gate kernel of layer l's `pass` over all rows and units (part 1: the reset-before GRU's
  // n kernel); forward, it reads gx as layer l's projection lays it out.
  KernelDesc gate_desc(Pass pass, std::int64_t l, int part = 0) const {
    KernelDesc d = gate_kernel_desc(config_, plan_.shape, plan_.mode, plan_.isa, pass);
    d.part = static_cast<std::uint8_t>(part);
    if (pass == Pass::forward && batch_major_gx(l)) d.gx_row_stride = static_cast<std::uint32_t>(s_.T * s_.GX);
    // Backward, the kernel reads dy (without a projection: with one it reads dcell, H wide).
    if (pass == Pass::backward && !s_.P && ld_dy(l) != s_.W) d.dy_row_stride = static_cast<std::uint32_t>(ld_dy(l));
    return d;
  }

  // The gate kernels of a recurrence: one per thread over the hidden units that thread's share
  // of `units` (the GEMM whose output columns are the gate kernel's hidden units: the recurrent
  // GEMM forward, and backward the recurrent gradient or, with a projection, dcell) covers.
  // part 1: the n kernels of a GRU with the reset before, into thread_kernels_n/thread_units_n.
  void split_gate_kernel(RecurrenceStep& r, Pass pass, const GemmStep& units, int part = 0) {
    std::vector<int>& kernels = part ? r.thread_kernels_n : r.thread_kernels;
    std::vector<std::int64_t>& first_units = part ? r.thread_units_n : r.thread_units;
    if (!units.blocking.generated()) {
      kernels = {part ? r.kernel_n : r.kernel};
      first_units = {0};
      return;
    }
    for (int t = 0; t < units.blocking.threads; ++t) {
      const auto [c0, c1] = units.blocking.thread_columns(t);
      KernelDesc d = gate_desc(pass, r.layer, part);
      d.rows = static_cast<std::uint32_t>(r.batch);
      d.cols = static_cast<std::uint32_t>(c1 - c0);
      kernels.push_back(c1 > c0 ? add_kernel_desc(d) : -1);
      first_units.push_back(c0);
    }
  }

  // --- regions -------------------------------------------------------------------------------
  void allocate_forward() {
    const auto& s = s_;
    const bool train = training();
    // Batch-first x ([N, T, I]) copied into sequence-major rows for what reads it so (plan_input()),
    // a region that backward data reuses for dx's sequence-major rows, copied out to [N, T, I].
    if (config_.batch_first && (train || !batch_major_gx(0)))
      input_seq_ = region("input_seq", false, s.T * s.N * config_.input_size);
    for (int d = 0; d < s.D; ++d) {
      gx_[d] = region(fmt::format("gx.d{}", d), false, s.T * s.N * s.GX);
      gh_[d] = region(fmt::format("gh.d{}", d), false, s.N * s.GH);
      carry_save_[d] = region(fmt::format("carry_save.d{}", d), false, s.N * 2 * s.H);
      if (s.reset_before) {
        if (!train) reset_h_[d] = region(fmt::format("reset_h.d{}", d), false, s.N * s.W);
        z_[d] = region(fmt::format("z.d{}", d), false, s.N * s.H);
      }
    }
    if (train) {
      plan_.lengths_region = plan_.workspace.add("seq_lengths", Space::reserve, static_cast<std::size_t>(s.N) * 4);
      if (dropout_)
        for (std::int64_t l = 0; l + 1 < s.L; ++l) {
          dropped_.push_back(region(fmt::format("dropped.l{}", l), true, s.T * s.N * s.B));
          dropout_mask_.push_back(plan_.workspace.add(fmt::format("dropout_mask.l{}", l), Space::reserve,
                                                      static_cast<std::size_t>(s.T * s.N * s.B)));
        }
      // The sums the layer above reads (below the top layer); kept for its dW_ih unless that
      // reads their dropped copy.
      for (std::int64_t l = 0; l + 1 < s.L; ++l)
        summed_.push_back(config_.sums_output(l) ? region(fmt::format("summed.l{}", l), !dropout_, s.T * s.N * s.B)
                                                 : -1);
      for (std::int64_t l = 0; l < s.L; ++l) {
        // [h_init of a forward direction; the T steps' h; h_init of a reverse direction], N
        // rows of W each: the h every step of a direction reads is then one run of T*N rows,
        // and dW_hh one GEMM over them (see h_init_operand()).
        out_.push_back(region(fmt::format("out.l{}", l), true, (s.T + h_init_before() + h_init_after()) * s.N * s.W));
        // r * h_prev of every step, laid out like the layer's output (direction d at column d*H).
        if (s.reset_before) reset_hs_.push_back(region(fmt::format("reset_h.l{}", l), true, s.T * s.N * s.W));
        for (int d = 0; d < s.D; ++d) {
          gates_.push_back(region(fmt::format("gates.l{}.d{}", l, d), true, s.T * s.N * s.R));
          if (s.lstm) {
            c_.push_back(region(fmt::format("c.l{}.d{}", l, d), true, s.T * s.N * s.H));
            c_init_.push_back(region(fmt::format("c_init.l{}.d{}", l, d), true, s.N * s.H));
          }
          if (s.P) {
            cell_out_.push_back(region(fmt::format("cell_out.l{}.d{}", l, d), true, s.T * s.N * s.H));
            dh_proj_.push_back(region(fmt::format("dh_proj.l{}.d{}", l, d), true, s.T * s.N * s.P));
          }
        }
      }
    } else {
      // Inference: layers below the top alternate between two output buffers; the top layer
      // writes y. The LSTM cell state is updated in place in one [N, H] buffer per direction.
      // A layer whose directions are summed writes both directions' h into one buffer (shared
      // by all such layers), whose sums go to the two output buffers or y.
      if (s.L > 1)
        for (int i = 0; i < std::min<std::int64_t>(2, s.L - 1); ++i)
          pingpong_[i] = region(fmt::format("layer_out.{}", i), false, s.T * s.N * s.B);
      if (config_.sum_directions) directions_out_ = region("directions_out", false, s.T * s.N * s.W);
      else if (config_.batch_first) y_seq_ = region("y_seq", false, s.T * s.N * s.W);
      const int h_init = region("h_init", false, s.N * s.W);
      h_init_.assign(static_cast<std::size_t>(s.L), h_init);
      if (s.lstm)
        for (int d = 0; d < s.D; ++d) cstate_[d] = region(fmt::format("c_state.d{}", d), false, s.N * s.H);
      if (s.P)
        for (int d = 0; d < s.D; ++d) cell_state_out_[d] = region(fmt::format("cell_out.d{}", d), false, s.N * s.H);
    }
  }

  void allocate_backward() {
    const auto& s = s_;
    for (int d = 0; d < s.D; ++d) {
      dh_[d] = region(fmt::format("dh_carry.d{}", d), false, s.N * s.S);
      if (s.reset_before) d_reset_h_[d] = region(fmt::format("d_reset_h.d{}", d), false, s.N * s.H);
      if (s.lstm) dc_[d] = region(fmt::format("dc_carry.d{}", d), false, s.N * s.H);
      if (s.P) {
        dcell_[d] = region(fmt::format("dcell.d{}", d), false, s.N * s.H);
        zeros_[d] = region(fmt::format("zeros.d{}", d), false, s.N * s.H);
      }
    }
    if (s.L > 1)
      for (int i = 0; i < std::min<std::int64_t>(2, s.L - 1); ++i)
        dlayer_[i] = region(fmt::format("dlayer.{}", i), false, s.T * s.N * s.B);
    if (config_.batch_first) dy_seq_ = region("dy_seq", false, s.T * s.N * s.Y);
  }

  // The h of layer l's directions, [T, N, W] with direction d at column d*S (where forward
  // writes it and backward reads it), sequence-major; batch-first y is written from it by
  // plan_outputs(). Unless the directions are summed it is the layer's output.
  Operand layer_output(std::int64_t l) const {
    if (training())
      return region_operand(plan_.workspace, out_[static_cast<std::size_t>(l)], h_init_before() * s_.N * s_.W);
    if (config_.sums_output(l)) return region_operand(plan_.workspace, directions_out_);
    if (l == s_.L - 1) return config_.batch_first ? region_operand(plan_.workspace, y_seq_) : buffer_operand(Buffer::y);
    return region_operand(plan_.workspace, pingpong_[l % 2]);
  }
  // What the layer above l reads of it, [T, N, B]: its output, or the sums of its directions.
  Operand output_above(std::int64_t l) const {
    if (!config_.sums_output(l)) return layer_output(l);
    return region_operand(plan_.workspace, training() ? summed_[static_cast<std::size_t>(l)] : pingpong_[l % 2]);
  }
  // What direction d of layer l reads: x (batch-first: its sequence-major copy, plan_input()),
  // the layer below's output, or (training with dropout) its dropped copy; in an independent
  // stack, only direction d's columns of it.
  Operand layer_input(std::int64_t l, int d) const {
    if (l == 0) return config_.batch_first ? region_operand(plan_.workspace, input_seq_) : buffer_operand(Buffer::x);
    const std::int64_t column = config_.layer_input_column(l, d);
    if (dropout_) return region_operand(plan_.workspace, dropped_[static_cast<std::size_t>(l - 1)], column);
    return shifted(output_above(l - 1), column);
  }
  // Which side of a copy of T*N rows is the caller's batch-first tensor ([N, T] rows).
  enum class BatchFirst { neither, src, dst };
  // A copy of the T*N (t, n) rows, `cols` wide, of sequence-major operands (rows ld_* apart),
  // one side of which may be batch-first: then T blocks of N rows, row (t, n) there at n*T + t.
  CopyStep rows_copy(std::string what, Operand src, std::int64_t ld_src, Operand dst, std::int64_t ld_dst,
                     std::int64_t cols, BatchFirst batch_first) const {
    CopyStep c{std::move(what), src, dst, s_.T * s_.N, cols, ld_src, ld_dst, false, false};
    if (batch_first == BatchFirst::neither) return c;
    c.rows = s_.N;  // block t: rows (t, 0..N-1)
    c.blocks = s_.T;
    if (batch_first == BatchFirst::src) {
      c.ld_src = s_.T * ld_src, c.block_src = ld_src, c.block_dst = s_.N * ld_dst;
    } else {
      c.ld_dst = s_.T * ld_dst, c.block_dst = ld_dst, c.block_src = s_.N * ld_src;
    }
    return c;
  }
  // sum_directions: dst = h of direction 0 + h of direction 1 of layer l, for every (t, n) row,
  // in one pass; dst's rows are [T, N, S], or batch-first [N, T, S] (y).
  void sum_directions(std::vector<Step>& lane, std::int64_t l, Operand dst, bool batch_first_dst) const {
    const auto& s = s_;
    CopyStep c = rows_copy(fmt::format("sum of directions l{}: h d0 + h d1", l), layer_output(l), s.W, dst, s.S, s.S,
                           batch_first_dst ? BatchFirst::dst : BatchFirst::neither);
    c.plus = shifted(layer_output(l), s.S);
    lane.push_back(std::move(c));
  }
  // h_init of layer l, direction d ([N, S] at column d*S, rows W apart). Training keeps it in
  // the layer's output region, right before step 0 (forward) or after step T-1 (reverse): the
  // rows of h_prev for steps 0..T-1 then start one step before the output (forward) or one
  // after it (reverse).
  Operand h_init_operand(std::int64_t l, int d) const {
    if (!training()) return shifted(region_operand(plan_.workspace, h_init_[static_cast<std::size_t>(l)]), d * s_.S);
    const std::int64_t block = config_.reversed(d) ? h_init_before() + s_.T : 0;
    return region_operand(plan_.workspace, out_[static_cast<std::size_t>(l)], block * s_.N * s_.W + d * s_.S);
  }
  // Blocks of N rows the training output region holds before the T steps' h (a direction runs
  // forward: only direction 0 can) and after them (a direction runs in reverse).
  std::int64_t h_init_before() const { return config_.reversed(0) ? 0 : 1; }
  std::int64_t h_init_after() const { return config_.reversed(0) || s_.D == 2 ? 1 : 0; }
  // Row stride of what layer l reads (and of its input gradient).
  std::int64_t ld_input(std::int64_t l) const { return config_.layer_input_stride(l); }
  std::size_t ld_index(std::int64_t l, int d) const { return static_cast<std::size_t>(l * s_.D + d); }
  static Operand shifted(Operand o, std::int64_t by) { o.offset += by; return o; }
  // A GEMM over a layer's T x N rows (of its input or input gradient) skips the rows of
  // finished sequences (GemmStep::finished_rows_skipped).
  void skip_finished_rows(GemmStep& g, bool rows_of_a_are_zero) const {
    g.finished_rows_skipped = true;
    g.sequences = s_.N;
    g.finished_rows_zero = rows_of_a_are_zero;
  }

  // The time loop of layer l, direction d (the reverse direction walks t = T-1..0).
  RecurrenceStep recurrence(Pass pass, std::int64_t l, int d) const {
    RecurrenceStep r;
    r.what = fmt::format("{} recurrence l{} d{}", pass == Pass::forward ? "forward" : "backward", l, d);
    r.pass = pass;
    r.layer = l;
    r.direction = d;
    r.reverse = config_.reversed(d);
    r.steps = s_.T;
    r.batch = s_.N;
    r.state = s_.S;
    r.ld_state = s_.W;
    r.carry_save = region_operand(plan_.workspace, carry_save_[d]);
    return r;
  }

  // --- forward -------------------------------------------------------------------------------
  void plan_forward() {
    const auto& s = s_;
    // Directions as lanes (a thread each), or a direction's batch rows as lanes (batch_slices_):
    // their input projections (two thirds of the work of a layer above the first) run first, on
    // all threads, which share the tiles as they go, so a core slowed by its neighbours holds up
    // only the recurrences.
    const bool own_projection_stage =
        ((s.D == 2 && lane_threads() == 1) || batch_slices_ > 1) && plan_.threads > 1 && generate_gemms();
    if (!batch_major_gx(0)) plan_input(plan_.forward);
    if (!config_.bias) {  // the gate kernels add a bias: zeros, in the caller's workspace every call
      zero_bias_ = region("zero_bias", false, s.GH);
      plan_.forward.push_back(Stage{{{CopyStep{"zero biases (no bias parameters)", {},
                                               region_operand(plan_.workspace, zero_bias_), 1, s.GH, s.GH, s.GH,
                                               false, false}}}});
    }
    for (std::int64_t l = 0; l < s.L; ++l) {
      Stage stage, projections{{{}}};
      for (int d = 0; d < s.D; ++d) {
        const Operand gx = region_operand(plan_.workspace, gx_[d]);
        const Operand input = batch_major_gx(l) ? buffer_operand(Buffer::x) : layer_input(l, d);
        GemmStep projection{fmt::format("input projection l{} d{}", l, d), false, true, s.T * s.N, s.GH,
                            config_.layer_input_size(l), input, weight(l, d, ParamKind::weight_ih), gx, ld_input(l),
                            config_.layer_input_size(l), s.GX, 0.0f, {}};
        projection.c_whole_vectors = s.GX > s.GH;
        // (Batch-major rows are all computed: the row blocks to skip are those of time-major ones.)
        if (!batch_major_gx(l)) skip_finished_rows(projection, false);
        // No thread needs its hidden units of every gate here (the recurrence does), so where H
        // is not a whole number of vectors the G gates are one group of G*H columns: panels
        // grouped by gate would pad every gate's last vector (H=50: 150 columns computed as 192).
        const std::string w_ih = fmt::format("w_ih.l{}.d{}", l, d);
        const std::int64_t group = s.H % 16 != 0 ? s.GH : s.H, groups = s.GH / group;
        std::vector<Step> lane;
        if (own_projection_stage)
          projections.lanes[0].push_back(input_projection(projection, w_ih, group, groups, plan_.threads));
        else
          lane.push_back(input_projection(projection, w_ih, group, groups, lane_threads()));
        if (batch_slices_ == 1) {
          forward_lane(lane, l, d, 0, s.N, lane_threads(), d);
          add_lane(stage, std::move(lane));
          continue;
        }
        for (int i = 0; i < batch_slices_; ++i) {
          std::vector<Step> slice;
          const auto [n0, n1] = batch_slice(i);
          forward_lane(slice, l, d, n0, n1, 1, d * batch_slices_ + i);
          stage.lanes.push_back(std::move(slice));
        }
      }
      if (own_projection_stage) plan_.forward.push_back(std::move(projections));
      plan_.forward.push_back(std::move(stage));
      if (config_.sums_output(l) && l + 1 < s.L) {
        std::vector<Step> sums;
        sum_directions(sums, l, output_above(l), false);
        plan_.forward.push_back(Stage{{std::move(sums)}});
      }
      if (dropout_ && l + 1 < s.L)
        plan_.forward.push_back(Stage{{{DropoutStep{fmt::format("dropout l{}", l), Pass::forward, l, config_.dropout,
                                                    output_above(l), layer_input(l + 1, 0),
                                                    dropout_mask_[static_cast<std::size_t>(l)],
                                                    s.T * s.N * s.B}}}});
    }
  }

  // The time loop of layer l, direction d over batch rows [n0, n1), appended to `lane` with the
  // copies of its initial state in and its final state out: every per-row operand starts n0 rows
  // down (the time strides stay those of the whole batch), and the recurrent GEMMs are planned
  // for `threads` threads, with lane `lane_index`'s scratch. Lanes of batch rows name their rows
  // in their steps, and share the packed weights (with_packed_weights).
  void forward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1, int threads,
                    int lane_index) {
    const auto& s = s_;
    const std::int64_t ldh = s.W, rows = n1 - n0;
    const std::size_t ld = ld_index(l, d);
    const bool sliced = n1 - n0 < s_.N;
    const std::string rows_note = sliced ? fmt::format(" rows {}..{}", n0, n1) : "";
    const Operand h_init = shifted(h_init_operand(l, d), n0 * ldh);
    const Operand hx = buffer_operand(Buffer::hx, ld * s.N * s.S + n0 * s.S);
    lane.push_back(CopyStep{fmt::format("h_init l{} d{}{} <- hx", l, d, rows_note), hx, h_init, rows, s.S, s.S, ldh,
                            true, false});
    Operand c_init;
    if (s.lstm) {
      c_init = region_operand(plan_.workspace, training() ? c_init_[ld] : cstate_[d], n0 * s.H);
      lane.push_back(CopyStep{fmt::format("c_init l{} d{}{} <- cx", l, d, rows_note),
                              buffer_operand(Buffer::cx, ld * s.N * s.H + n0 * s.H), c_init, rows, s.H, s.H, s.H,
                              true, false});
    }
    RecurrenceStep r = recurrence(Pass::forward, l, d);
    r.kernel = add_kernel_desc(gate_desc(Pass::forward, l));
    if (sliced) r.what += rows_note;
    r.batch = rows;
    r.batch_begin = n0;
    r.carry_save = shifted(r.carry_save, n0 * 2 * s.H);
    r.gh = region_operand(plan_.workspace, gh_[d], n0 * s.GH);
    if (s.reset_before) {
      // r,z on h_prev (gates 0 and 1 of W_hh), then n on r * h_prev (gate 2) after a barrier.
      r.gemm = with_packed_weights(GemmStep{"recurrent projection r,z", false, true, rows, 2 * s.H, s.S, {},
                                            weight(l, d, ParamKind::weight_hh), r.gh, ldh, s.S, s.GH, 0.0f, {}},
                                   fmt::format("w_hh_rz.l{}.d{}", l, d), true, s.H, 2, threads, lane_index);
      r.reset_h = training() ? Timed{shifted(region_operand(plan_.workspace, reset_hs_[static_cast<std::size_t>(l)]),
                                             d * s.S + n0 * ldh),
                                     s.N * ldh}
                             : Timed{region_operand(plan_.workspace, reset_h_[d], n0 * ldh), 0};
      r.z = region_operand(plan_.workspace, z_[d], n0 * s.H);
      r.kernel_n = add_kernel_desc(gate_desc(Pass::forward, l, 1));
      r.gemm_n = with_packed_weights(GemmStep{"recurrent projection n (on r * h_prev)", false, true, rows, s.H, s.S, {},
                                              shifted(weight(l, d, ParamKind::weight_hh), 2 * s.H * s.S),
                                              shifted(r.gh, 2 * s.H), ldh, s.S, s.GH, 0.0f, {}},
                                     fmt::format("w_hh_n.l{}.d{}", l, d), true, s.H, 1, threads, lane_index);
      split_gate_kernel(r, Pass::forward, r.gemm_n, 1);
    } else {
      r.gemm = with_packed_weights(GemmStep{"recurrent projection", false, true, rows, s.GH, s.S, {},
                                            weight(l, d, ParamKind::weight_hh), r.gh, ldh, s.S, s.GH, 0.0f, {}},
                                   fmt::format("w_hh.l{}.d{}", l, d), true, 0, 0, threads, lane_index);
    }
    split_gate_kernel(r, Pass::forward, r.gemm);
    r.gx = batch_major_gx(l) ? Timed{region_operand(plan_.workspace, gx_[d], n0 * s.T * s.GX), s.GX}
                             : Timed{region_operand(plan_.workspace, gx_[d], n0 * s.GX), s.N * s.GX};
    r.h = {shifted(layer_output(l), d * s.S + n0 * ldh), s.N * ldh};
    if (s.P) {
      r.cell_out = training() ? Timed{region_operand(plan_.workspace, cell_out_[ld], n0 * s.H), s.N * s.H}
                              : Timed{region_operand(plan_.workspace, cell_state_out_[d], n0 * s.H), 0};
      r.projection = with_packed_weights(GemmStep{"output projection", false, true, rows, s.P, s.H, {},
                                                  weight(l, d, ParamKind::weight_hr), {}, s.H, s.H, ldh, 0.0f, {}},
                                         fmt::format("w_hr.l{}.d{}", l, d), true, s.P, 1, threads,
                                         lane_index);
    }
    r.bias_ih = bias(l, d, ParamKind::bias_ih);
    r.bias_hh = bias(l, d, ParamKind::bias_hh);
    if (config_.peephole) r.peephole = weight(l, d, ParamKind::weight_peephole);
    r.h_init = h_init;
    r.hx = hx;
    if (s.lstm) {
      r.c_init = c_init;
      r.c = training() ? Timed{region_operand(plan_.workspace, c_[ld], n0 * s.H), s.N * s.H} : Timed{c_init, 0};
    }
    if (training()) r.gates = {region_operand(plan_.workspace, gates_[ld], n0 * s.R), s.N * s.R};
    const std::int64_t last = r.reverse ? 0 : s.T - 1;
    const Timed h = r.h, c = r.c;
    lane.push_back(std::move(r));
    lane.push_back(CopyStep{fmt::format("hy l{} d{}{}", l, d, rows_note), shifted(h.base, last * h.t_stride),
                            buffer_operand(Buffer::hy, ld * s.N * s.S + n0 * s.S), rows, s.S, ldh, s.S, false, true});
    if (s.lstm)
      lane.push_back(CopyStep{fmt::format("cy l{} d{}{}", l, d, rows_note), shifted(c.base, last * c.t_stride),
                              buffer_operand(Buffer::cy, ld * s.N * s.H + n0 * s.H), rows, s.H, s.H, s.H, false,
                              true});
  }

  // y from the top layer's sequence-major output when that is not y itself (training keeps it in
  // the reserve; batch-first y has its rows in the other order), then zeros past the lengths.
  void plan_outputs() {
    const auto& s = s_;
    const std::int64_t ldh = s.W;
    std::vector<Step> lane;
    const Operand top = layer_output(s.L - 1);
    if (config_.sum_directions)
      sum_directions(lane, s.L - 1, buffer_operand(Buffer::y), config_.batch_first);
    else if (config_.batch_first)
      lane.push_back(rows_copy("y [N, T] <- top layer output [T, N]", top, ldh, buffer_operand(Buffer::y), ldh, ldh,
                               BatchFirst::dst));
    else if (training())
      lane.push_back(rows_copy("y <- top layer output", top, ldh, buffer_operand(Buffer::y), ldh, ldh,
                               BatchFirst::neither));
    lane.push_back(MaskStep{"y past the sequence lengths", buffer_operand(Buffer::y), s.T, s.N, s.Y,
                            config_.batch_first ? s.Y : s.N * s.Y, config_.batch_first ? s.T * s.Y : s.Y});
    plan_.forward.push_back(Stage{{std::move(lane)}});
  }

  // Batch-first x is copied into sequence-major rows (layer_input()) by each call that reads it
  // (the workspace is free between calls). Its GEMMs are then those of sequence-major x: one
  // input projection over all T*N rows, one dW_ih summing them (a product of T rows for each
  // batch element, x read in place, was 2-3x slower at small T).
  void plan_input(std::vector<Stage>& call) const {
    if (!config_.batch_first) return;
    const std::int64_t in = config_.input_size;
    call.push_back(Stage{{{rows_copy("x [T, N] <- x [N, T]", buffer_operand(Buffer::x), in, layer_input(0, 0), in, in,
                                     BatchFirst::src)}}});
  }

  // Batch-first dy is first copied into sequence-major rows, which the gate kernels read.
  void plan_dy() {
    if (!config_.batch_first) return;
    const std::int64_t ldy = s_.Y;
    plan_.backward_data.push_back(Stage{{{rows_copy("dy [T, N] <- dy [N, T]", buffer_operand(Buffer::dy), ldy,
                                                    region_operand(plan_.workspace, dy_seq_), ldy, ldy,
                                                    BatchFirst::src)}}});
  }

  // --- backward data -------------------------------------------------------------------------
  // The input-side gate gradients as (first gate column, gate count, first W_ih row) pieces:
  // contiguous for LSTM and RNN; for GRU r,z at columns [0, 2H) and n at [3H, 4H).
  struct InputSide { std::int64_t col, width, row; };
  std::vector<InputSide> input_side() const {
    if (s_.gru) return {{0, 2 * s_.H, 0}, {3 * s_.H, s_.H, 2 * s_.H}};
    return {{0, s_.GH, 0}};
  }

  // The gradient of layer l's output, [T, N, layer_output_size(l)]: the layer above's input
  // gradient, or dy.
  Operand dy_of_layer(std::int64_t l) const {
    if (l < s_.L - 1) return region_operand(plan_.workspace, dlayer_[l % 2]);
    return config_.batch_first ? region_operand(plan_.workspace, dy_seq_) : buffer_operand(Buffer::dy);
  }
  // The row stride of the gradient layer l's backward recurrences read for their h: the layer's
  // output gradient, direction d's at column d*S of rows W wide; or, where the directions were
  // summed, the gradient of their sum, rows S wide, which both directions read whole, in place.
  std::int64_t ld_dy(std::int64_t l) const { return config_.sums_output(l) ? s_.S : s_.W; }
  Operand dy_of_direction(std::int64_t l, int d) const {
    return shifted(dy_of_layer(l), config_.sums_output(l) ? 0 : d * s_.S);
  }
  Operand dx_of_layer(std::int64_t l) const {
    if (l == 0) return config_.batch_first ? region_operand(plan_.workspace, input_seq_) : buffer_operand(Buffer::dx);
    return region_operand(plan_.workspace, dlayer_[(l - 1) % 2]);
  }

  void plan_backward_data() {
    const auto& s = s_;
    for (std::int64_t l = s.L - 1; l >= 0; --l) {
      Stage stage;
      for (int d = 0; d < s.D; ++d) {
        if (batch_slices_ == 1) {
          std::vector<Step> lane;
          backward_lane(lane, l, d, 0, s.N, 0, d);
          add_lane(stage, std::move(lane));
          continue;
        }
        for (int i = 0; i < batch_slices_; ++i) {
          std::vector<Step> slice;
          const auto [n0, n1] = batch_slice(i);
          backward_lane(slice, l, d, n0, n1, 1, d * batch_slices_ + i);
          stage.lanes.push_back(std::move(slice));
        }
      }
      plan_.backward_data.push_back(std::move(stage));
      // dx of this layer (dy of the one below) sums both directions: dgx_d W_ih_d (independent
      // stacks: each direction's goes to its own columns).
      std::vector<Step> lane;
      const std::int64_t in = config_.layer_input_size(l);
      const bool own_columns = l > 0 && config_.independent_stacks;
      bool first = true;
      for (int d = 0; d < s.D; ++d) {
        if (own_columns) first = true;
        for (const InputSide& piece : input_side()) {
          GemmStep dx{fmt::format("input gradient l{} d{}", l, d), false, false, s.T * s.N, in, piece.width,
                      region_operand(plan_.workspace, gates_[ld_index(l, d)], piece.col),
                      shifted(weight(l, d, ParamKind::weight_ih), piece.row * in),
                      shifted(dx_of_layer(l), config_.layer_input_column(l, d)), s.R, in, ld_input(l),
                      first ? 0.0f : 1.0f, {}};
          skip_finished_rows(dx, true);
          lane.push_back(generated(dx, in, plan_.threads, false, 0, &lane));
          first = false;
        }
      }
      if (l == 0 && config_.batch_first)
        lane.push_back(rows_copy("dx [N, T] <- dx [T, N]", dx_of_layer(0), in, buffer_operand(Buffer::dx), in, in,
                                 BatchFirst::dst));
      plan_.backward_data.push_back(Stage{{std::move(lane)}});
      if (dropout_ && l > 0)
        plan_.backward_data.push_back(Stage{{{DropoutStep{fmt::format("dropout l{} backward", l - 1), Pass::backward,
                                                          l - 1, config_.dropout, {}, dx_of_layer(l),
                                                          dropout_mask_[static_cast<std::size_t>(l - 1)],
                                                          s.T * s.N * s.B}}}});
    }
  }

  // The backward time loop of layer l, direction d over batch rows [n0, n1), appended to `lane`
  // (whose scratch is lane `lane_index`'s) with the copies of the carried gradients in and out,
  // shifted and planned as forward_lane() does (`threads` 0: the lane's).
  void backward_lane(std::vector<Step>& lane, std::int64_t l, int d, std::int64_t n0, std::int64_t n1, int threads,
                     int lane_index) {
    const auto& s = s_;
    const std::int64_t ldh = s.W, rows = n1 - n0;
    const std::size_t ld = ld_index(l, d);
    const bool sliced = n1 - n0 < s_.N;
    const std::string rows_note = sliced ? fmt::format(" rows {}..{}", n0, n1) : "";
    const Operand dh = region_operand(plan_.workspace, dh_[d], n0 * s.S);
    lane.push_back(CopyStep{fmt::format("dh_carry d{} <- dhy l{}{}", d, l, rows_note),
                            buffer_operand(Buffer::dhy, ld * s.N * s.S + n0 * s.S), dh, rows, s.S, s.S, s.S, true,
                            false});
    Operand dc;
    if (s.lstm) {
      dc = region_operand(plan_.workspace, dc_[d], n0 * s.H);
      lane.push_back(CopyStep{fmt::format("dc_carry d{} <- dcy l{}{}", d, l, rows_note),
                              buffer_operand(Buffer::dcy, ld * s.N * s.H + n0 * s.H), dc, rows, s.H, s.H, s.H, true,
                              false});
    }
    RecurrenceStep r = recurrence(Pass::backward, l, d);
    r.kernel = add_kernel_desc(gate_desc(Pass::backward, l));
    if (sliced) r.what += rows_note;
    r.batch = rows;
    r.batch_begin = n0;
    r.carry_save = shifted(r.carry_save, n0 * 2 * s.H);
    r.gates = {region_operand(plan_.workspace, gates_[ld], n0 * s.R), s.N * s.R};
    if (s.reset_before) {
      // d(r * h_prev) = dn W_hn first (W_hh's n rows), then dh_carry += [dr, dz] W_hh[r,z rows].
      r.d_reset_h = region_operand(plan_.workspace, d_reset_h_[d], n0 * s.H);
      r.kernel_n = add_kernel_desc(gate_desc(Pass::backward, l, 1));
      r.gemm_n = generated(GemmStep{"reset gradient d(r * h_prev) = dn W_hn" + rows_note, false, false, rows, s.H, s.H,
                                    {}, shifted(weight(l, d, ParamKind::weight_hh), 2 * s.H * s.S), r.d_reset_h, s.R,
                                    s.S, s.H, 0.0f, {}},
                           s.H, threads, true, lane_index, &lane, true);
      r.gemm = generated(GemmStep{"recurrent gradient r,z" + rows_note, false, false, rows, s.S, 2 * s.H, {},
                                  weight(l, d, ParamKind::weight_hh), dh, s.R, s.S, s.S, 1.0f, {}},
                         s.S, threads, true, lane_index, &lane);
      split_gate_kernel(r, Pass::backward, r.gemm_n, 1);
    } else {
      r.gemm = generated(GemmStep{"recurrent gradient" + rows_note, false, false, rows, s.S, s.GH, {},
                                  weight(l, d, ParamKind::weight_hh), dh, s.R, s.S, s.S, s.gru ? 1.0f : 0.0f, {}},
                         s.S, threads, true, lane_index, &lane);
    }
    if (s.P) {
      r.dh_proj = {region_operand(plan_.workspace, dh_proj_[ld], n0 * s.P), s.N * s.P};
      r.dcell = region_operand(plan_.workspace, dcell_[d], n0 * s.H);
      r.zeros = region_operand(plan_.workspace, zeros_[d], n0 * s.H);
      lane.push_back(
          CopyStep{fmt::format("zeros d{}{}", d, rows_note), {}, r.zeros, rows, s.H, s.H, s.H, false, false});
      r.projection_grad = generated(GemmStep{"projection gradient" + rows_note, false, false, rows, s.H, s.P, {},
                                             weight(l, d, ParamKind::weight_hr), r.dcell, s.P, s.H, s.H, 0.0f, {}},
                                    s.H, threads, true, lane_index, &lane, true);
    }
    split_gate_kernel(r, Pass::backward, s.P ? r.projection_grad : s.reset_before ? r.gemm_n : r.gemm);
    r.ld_dy = ld_dy(l);
    r.dy = {shifted(dy_of_direction(l, d), n0 * r.ld_dy), s.N * r.ld_dy};
    r.h = {shifted(layer_output(l), d * s.S + n0 * ldh), s.N * ldh};
    r.h_init = shifted(h_init_operand(l, d), n0 * ldh);
    r.dh_carry = dh;
    if (s.lstm) {
      r.c = {region_operand(plan_.workspace, c_[ld], n0 * s.H), s.N * s.H};
      r.c_init = region_operand(plan_.workspace, c_init_[ld], n0 * s.H);
      r.dc_carry = dc;
    }
    if (config_.peephole) r.peephole = weight(l, d, ParamKind::weight_peephole);
    const Operand dhx = buffer_operand(Buffer::dhx, ld * s.N * s.S + n0 * s.S);
    r.dhx = dhx;
    lane.push_back(std::move(r));
    lane.push_back(CopyStep{fmt::format("dhx l{} d{}{}", l, d, rows_note), dh, dhx, rows, s.S, s.S, s.S, false, true});
    if (s.lstm)
      lane.push_back(CopyStep{fmt::format("dcx l{} d{}{}", l, d, rows_note), dc,
                              buffer_operand(Buffer::dcx, ld * s.N * s.H + n0 * s.H), rows, s.H, s.H, s.H, false,
                              true});
  }

  // --- backward weights (beta 0 here; the executor turns it into 1 to accumulate) ------------
  void plan_backward_weights() {
    const auto& s = s_;
    plan_input(plan_.backward_weights);
    const std::int64_t ldh = s.W;
    // The two directions' weight gradients run one after the other in one lane, every GEMM
    // on all threads (which share its tiles as they go), rather than as a lane per direction
    // on a thread each: a core slowed by its neighbours would hold up the whole layer. Then the
    // directions' GEMMs also share one lane's scratch (lane 0).
    const bool one_lane = s.D == 2 && plan_.threads > 1 && generate_gemms();
    auto gemm = [&](GemmStep g, std::int64_t group, int d, std::vector<Step>* pack_into) {
      return one_lane ? generated(std::move(g), group, plan_.threads, false, 0, pack_into)
                      : generated(std::move(g), group, 0, false, d, pack_into);
    };
    for (std::int64_t l = 0; l < s.L; ++l) {
      Stage stage;
      for (int d = 0; d < s.D; ++d) {
        std::vector<Step> lane;
        const Operand gates = region_operand(plan_.workspace, gates_[ld_index(l, d)]);
        const std::int64_t in = config_.layer_input_size(l);
        std::size_t dw_ih_index = 0;          // in lane: the last dW_ih GEMM
        std::optional<PackStep> x_panels;     // the pieces' B (the layer input) as last packed
        for (const InputSide& piece : input_side()) {
          GemmStep dw{fmt::format("dW_ih l{} d{}", l, d), true, false, piece.width, in, s.T * s.N,
                      shifted(gates, piece.col), layer_input(l, d), dweight(l, d, ParamKind::weight_ih, piece.row, in),
                      s.R, ld_input(l), in, 0.0f, {}, {}};
          dw.sequences = s.N;
          dw.finished_k_rows_skipped = true;
          // Its A panels kept for dW_hh where the two share them (share_a_panels() below
          // decides, and gives them their region).
          if (!s.gru) dw.a_panels_use = GemmStep::APanels::keep_for_next;
          std::vector<Step> packs;
          dw = gemm(dw, in, d, &packs);
          // The GRU's pieces multiply the same B: packed once where their panels are alike.
          const auto* pack = packs.empty() ? nullptr : std::get_if<PackStep>(&packs.front());
          if (!pack || !x_panels || !same_panels(*pack, *x_panels)) {
            if (pack) x_panels = *pack;
            for (Step& step : packs) lane.push_back(std::move(step));
          }
          // A B that is not packed is masked into a copy (variable lengths). Its home: the
          // lane's B scratch (no GEMM packs).
          if (!dw.blocking.packed_b) {
            const int scratch_lane = one_lane ? 0 : d;
            const std::int64_t elements = (dw.k - 1) * dw.ldb + dw.n;  // as B
            dw.b_masked = region_operand(plan_.workspace, lane_region(b_panels_.at(static_cast<std::size_t>(scratch_lane)),
                                                                      "b_panels", scratch_lane, elements));
          }
          dw_ih_index = lane.size();
          lane.push_back(std::move(dw));
          if (!config_.bias) continue;
          // b_ih and b_hh add to the same pre-activations, so one column sum writes both; but
          // for the GRU's n rows (the plain GRU puts r between b_hn and dn, the reset-before one
          // keeps their gradients in columns of their own), summed for db_hh below.
          const bool same_bias_rows = !s.gru || piece.col + piece.width <= 2 * s.H;
          ColumnSumStep db{fmt::format("db_ih{} l{} d{}", same_bias_rows ? " and db_hh" : "", l, d),
                           shifted(gates, piece.col), dweight(l, d, ParamKind::bias_ih, piece.row, 1), s.T * s.N,
                           piece.width, s.R, 0.0f};
          if (same_bias_rows) db.also_dst = dweight(l, d, ParamKind::bias_hh, piece.row, 1);
          lane.push_back(std::move(db));
        }
        // dW_hh pairs the gradient at time t with h at the previous time of this direction:
        // h_init, then the output, lie in one run of rows (h_init_operand()), so the h_prev of
        // steps 0..T-1 are the T*N rows from one step before the output (forward) or after it.
        const Operand h_prev = shifted(layer_output(l), (config_.reversed(d) ? 1 : -1) * s.N * ldh + d * s.S);
        // A zero h0 leaves its rows out of the sum (GemmStep::h0), of dW_hn's r * h_prev too.
        const RowBlock h0{h_init_operand(l, d), s.N, s.S, ldh};
        const bool h0_rows_last = config_.reversed(d) || s.T == 1;
        // The reset-before GRU's n rows multiply r * h_prev, kept per step: one GEMM of their own.
        const std::int64_t h_rows = s.reset_before ? 2 * s.H : s.GH;
        {
          GemmStep dw{fmt::format("dW_hh l{} d{}", l, d), true, false, h_rows, s.S, s.T * s.N, gates,
                      h_prev, dweight(l, d, ParamKind::weight_hh), s.R, ldh, s.S, 0.0f, {}, {}};
          dw.h0 = h0;
          dw.h0_rows_last = h0_rows_last;
          const bool may_share = std::get<GemmStep>(lane[dw_ih_index]).a_panels_use == GemmStep::APanels::keep_for_next;
          if (may_share) dw.a_panels_use = GemmStep::APanels::packed_before;
          dw = gemm(std::move(dw), s.S, d, &lane);
          if (may_share) share_a_panels(std::get<GemmStep>(lane[dw_ih_index]), dw, one_lane ? 0 : d);
          lane.push_back(std::move(dw));
        }
        if (s.reset_before) {
          GemmStep dw{fmt::format("dW_hn l{} d{} (on r * h_prev)", l, d), true, false, s.H, s.S, s.T * s.N,
                      shifted(gates, 2 * s.H),
                      shifted(region_operand(plan_.workspace, reset_hs_[static_cast<std::size_t>(l)]), d * s.S),
                      dweight(l, d, ParamKind::weight_hh, 2 * s.H, s.S), s.R, ldh, s.S, 0.0f, {}, {}};
          dw.h0 = h0;
          dw.h0_rows_last = h0_rows_last;
          dw = gemm(std::move(dw), s.S, d, &lane);
          lane.push_back(std::move(dw));
        }
        if (s.P) {  // dW_hr = sum over (t, n) of dh_proj^T (o * tanh(c))
          const std::size_t ld = ld_index(l, d);
          GemmStep dw = gemm(GemmStep{fmt::format("dW_hr l{} d{}", l, d), true, false, s.P, s.H, s.T * s.N,
                                      region_operand(plan_.workspace, dh_proj_[ld]),
                                      region_operand(plan_.workspace, cell_out_[ld]),
                                      dweight(l, d, ParamKind::weight_hr), s.P, s.H, s.H, 0.0f, {}, {}},
                             s.H, d, &lane);
          lane.push_back(std::move(dw));
        }
        if (s.gru && config_.bias)  // its r and z rows were summed with db_ih's
          lane.push_back(ColumnSumStep{fmt::format("db_hh (n) l{} d{}", l, d), shifted(gates, 2 * s.H),
                                       dweight(l, d, ParamKind::bias_hh, 2 * s.H, 1), s.T * s.N, s.H, s.R, 0.0f});
        if (config_.peephole) plan_peephole_gradient(lane, l, d);
        add_lane(stage, std::move(lane), one_lane);
      }
      plan_.backward_weights.push_back(std::move(stage));
    }
  }

  // Names a packed copy whose panels thread boundaries cut (GemmBlocking::cuts()).
  static std::string cuts_suffix(const std::vector<std::int64_t>& cuts) {
    return cuts.empty() ? std::string() : fmt::format(".cut{}", fmt::join(cuts, "_"));
  }

  // Whether two packs of B leave the same panels in the same place.
  static bool same_panels(const PackStep& a, const PackStep& b) {
    return a.src == b.src && a.dst == b.dst && a.k == b.k && a.groups == b.groups &&
           a.blocking.n_r == b.blocking.n_r && a.blocking.group == b.blocking.group && a.transpose == b.transpose &&
           a.ld == b.ld && a.sequences == b.sequences && a.blocking.bf16 == b.blocking.bf16 &&
           a.blocking.cuts() == b.blocking.cuts();
  }

  // dW_ih and dW_hh of the LSTM and the plain RNN both sum over the gate gradients (A^T, one
  // GEMM each over all gates), and were planned to share: where the two tile A alike, the
  // first packs A's panels once, for all of K, and the second reads them instead of packing A
  // again (a pass over T*N*G*H floats, and as many written, saved); else each packs its own, a
  // k block at a time. Either way their A panels get their region here, sized for what they hold.
  void share_a_panels(GemmStep& first, GemmStep& second, int lane) {
    const GemmBlocking &a = first.blocking, &b = second.blocking;
    const bool same_a = first.a == second.a && first.m == second.m && first.k == second.k && first.lda == second.lda;
    if (!same_a || !a.pack_a || !b.pack_a || a.m_r != b.m_r || a.k_c != b.k_c)
      first.a_panels_use = second.a_panels_use = GemmStep::APanels::per_k_block;
    for (GemmStep* g : {&first, &second})
      if (g->blocking.pack_a)
        g->a_panels = region_operand(plan_.workspace, lane_region(a_panels_.at(static_cast<std::size_t>(lane)),
                                                                  "a_panels", lane, a_panel_elements(*g)));
  }

  // dP_i, dP_f: the i and f gradients times c_{t-1} (c_init at the direction's first step, else
  // c at the previous time); dP_o: the o gradient times c_t. Rows past a length add nothing (their
  // gate gradients are zero).
  void plan_peephole_gradient(std::vector<Step>& lane, std::int64_t l, int d) {
    const auto& s = s_;
    const std::size_t ld = ld_index(l, d);
    const Operand gates = region_operand(plan_.workspace, gates_[ld]);
    const Operand c = region_operand(plan_.workspace, c_[ld]);
    const Operand c_init = region_operand(plan_.workspace, c_init_[ld]);
    const bool reverse = config_.reversed(d);
    const std::int64_t first_t = reverse ? s.T - 1 : 0, step = s.N * s.R;
    for (int gate : {0, 1}) {
      const Operand dp = dweight(l, d, ParamKind::weight_peephole, gate, s.H);
      const std::string what = fmt::format("dP_{} l{} d{}", gate == 0 ? 'i' : 'f', l, d);
      lane.push_back(ColumnSumStep{what + " (first step, c_init)", shifted(gates, first_t * step + gate * s.H), dp, s.N,
                                   s.H, s.R, 0.0f, c_init, s.H});
      if (s.T > 1)
        lane.push_back(ColumnSumStep{what, shifted(gates, (reverse ? 0 : s.N) * s.R + gate * s.H), dp, (s.T - 1) * s.N,
                                     s.H, s.R, 1.0f, shifted(c, reverse ? s.N * s.H : 0), s.H});
    }
    lane.push_back(ColumnSumStep{fmt::format("dP_o l{} d{}", l, d), shifted(gates, 3 * s.H),
                                 dweight(l, d, ParamKind::weight_peephole, 2, s.H), s.T * s.N, s.H, s.R, 0.0f, c, s.H});
  }

  RnnConfig config_;
  GemmChooser projection_gemm_;
  WeightLayout layout_;
  Plan plan_;
  Sizes s_{};
  int reset_h_[2] = {-1, -1}, z_[2] = {-1, -1}, d_reset_h_[2] = {-1, -1};  // GRU with the reset before
  std::vector<int> reset_hs_;  // GRU with the reset before, training: r * h_prev per layer (reserve)
  bool dropout_ = false;  // training with dropout between layers
  bool split_directions_ = false;  // directions in turn on all threads, not as lanes (constructor)
  int batch_slices_ = 1;           // recurrences as lanes of batch rows per direction, a thread each (constructor)
  int carry_save_[2] = {-1, -1}, y_seq_ = -1, dy_seq_ = -1, input_seq_ = -1;
  int cell_state_out_[2] = {-1, -1}, dcell_[2] = {-1, -1}, zeros_[2] = {-1, -1};  // projection
  std::vector<int> cell_out_, dh_proj_;                                           // projection (reserve)
  std::vector<int> dropped_, dropout_mask_;  // per layer below the top (reserve)
  int zero_bias_ = -1;                        // no bias parameters: G*H zeros (workspace)
  // Summed directions: both directions' h of a layer, [T, N, W] (inference: of every summed
  // layer), and (training) the sums each layer below the top gives the one above it.
  int directions_out_ = -1;
  std::vector<int> summed_;
  int gx_[2] = {-1, -1}, gh_[2] = {-1, -1}, cstate_[2] = {-1, -1}, pingpong_[2] = {-1, -1};
  int dh_[2] = {-1, -1}, dc_[2] = {-1, -1}, dlayer_[2] = {-1, -1};
  std::vector<int> a_panels_, b_panels_;  // per lane (constructor: as many as a stage can have)
  // The weights packed so far (with_packed_weights): their source, shape and panel layout.
  struct PackedWeights {
    Operand src;
    std::int64_t k, groups, group, n_r;
    bool bf16;
    std::vector<std::int64_t> cuts;  // GemmBlocking::cuts(): where panels hold parts
    int region;
    bool same_panels(const PackedWeights& o) const {
      return src == o.src && k == o.k && groups == o.groups && group == o.group && n_r == o.n_r && bf16 == o.bf16 &&
             cuts == o.cuts;
    }
  };
  std::vector<PackedWeights> packed_weights_;
  std::vector<int> out_, h_init_, gates_, c_, c_init_;
};

int append_kernel(std::vector<KernelDesc>& kernels, const KernelDesc& d) {
  for (std::size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i] == d) return static_cast<int>(i);
  kernels.push_back(d);
  return static_cast<int>(kernels.size()) - 1;
}

// Registers g's kernels: one per row tail (g.m % m_r rows), width (a whole panel, the narrower
// last panel of a group, a part of a panel that the threads' boundaries cut) and beta, where
// that case occurs; `fill` sets the fields particular to the engine.
template <typename Fill>
void add_gemm_kernels(GemmStep& g, std::int64_t group, KernelKind kind, std::vector<KernelDesc>& kernels, Fill fill) {
  GemmBlocking& b = g.blocking;
  const std::int64_t tail_rows = g.m % b.m_r;
  const std::int64_t last_width = group - (b.panels_per_group() - 1) * b.panel_columns();
  auto add = [&](std::int64_t width, std::int64_t stride, int row_tail, int beta) {
    KernelDesc d;
    d.kind = static_cast<std::uint8_t>(kind);
    d.isa = static_cast<std::uint8_t>(Isa::avx512);
    d.beta = static_cast<std::uint8_t>(beta);
    d.vectors = static_cast<std::uint8_t>((width + 15) / 16);
    d.n_tail = static_cast<std::uint8_t>(g.c_whole_vectors && kind == KernelKind::gemm ? 0 : width % 16);
    d.rows = static_cast<std::uint32_t>(row_tail ? tail_rows : b.m_r);
    d.b_lookahead = static_cast<std::uint32_t>(b.b_lookahead);
    d.c_row_stride = static_cast<std::uint32_t>(g.ldc);
    fill(d);
    if (b.packed_b && stride != b.panel_columns()) d.b_k_stride = static_cast<std::uint32_t>(stride);
    return append_kernel(kernels, d);
  };
  b.part_kernels.clear();
  if (b.vector_split)
    for (int tid = 0; tid < b.threads; ++tid) {
      const auto [p0, p1] = b.thread_panels(tid);
      for (std::int64_t p = p0; p < p1; ++p) {
        const GemmBlocking::Part part = b.panel_part(tid, p);
        const std::int64_t width = part.c1 - part.c0;
        const bool known = std::any_of(b.part_kernels.begin(), b.part_kernels.end(), [&](const auto& k) {
          return k.width == width && k.stride == part.stride;
        });
        if (part.stride != b.panel_columns() && !known) b.part_kernels.push_back({width, part.stride});
      }
    }
  for (int row_tail = 0; row_tail < 2; ++row_tail)
    for (int beta = 0; beta < 2; ++beta) {
      if (row_tail && tail_rows == 0) continue;
      for (int col_tail = 0; col_tail < 2; ++col_tail)
        if (!col_tail || last_width != b.panel_columns())
          b.kernels[row_tail][col_tail][beta] =
              add(col_tail ? last_width : b.panel_columns(), b.panel_columns(), row_tail, beta);
      for (GemmBlocking::PartKernels& part : b.part_kernels)
        part.kernels[row_tail][beta] = add(part.width, part.stride, row_tail, beta);
    }
}

// An AMX-BF16 GEMM (GemmBlocking::bf16): its blocking and a kernel per row tail, column tail
// and beta. B must be packed weights (W^T) and A read as is (not transposed).
GemmStep plan_bf16_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels, bool shared,
                        const CacheSizes& caches) {
  if (g.trans_a || !g.blocking.packed_b)
    throw Error(fmt::format("gemm '{}': bf16 runs only on packed weights and a plain A", g.what));
  GemmBlocking& b = g.blocking;
  b = choose_bf16_blocking(g.m, g.k, group, threads, caches, shared);
  add_gemm_kernels(g, group, KernelKind::amx_gemm, kernels, [&](KernelDesc& d) {
    d.a_row_stride = static_cast<std::uint32_t>(bf16_k(g.k));
    d.b_k_stride = static_cast<std::uint32_t>(b.n_r);  // a narrow last panel keeps the layout's n_r tiles
    d.a_lookahead = static_cast<std::uint8_t>(b.a_lookahead);
  });
  return g;
}

}  // namespace

// Whether a one-shot GEMM writes C with non-temporal stores. A C larger than its threads' L2
// (an input projection's gates for all steps) is read back only once the other tiles have
// pushed it out, so ordinary stores first read every line of it in for ownership: streaming
// them saves that read. LSTM I=H=512 T=50 inference: N=16..128 (gates 6.5-52 MB) 2-4% faster,
// the projection alone 4-7%; N=4 and 8 (1.6 and 3.3 MB) within the noise. They need C
// overwritten in one pass (beta 0, one k block) and every tile row 64-byte aligned: C in a
// workspace or reserve region (those are), at an offset, row stride and group width of whole
// vectors.
bool streams_c(const GemmStep& g, const GemmBlocking& b, const CacheSizes& caches) {
  const double min_bytes = static_cast<double>(caches.l2) * b.threads;
  const bool aligned = g.c.offset % 16 == 0 && g.ldc % 16 == 0 && (b.group % 16 == 0 || g.c_whole_vectors);
  return (g.c.buffer == Buffer::workspace || g.c.buffer == Buffer::reserve) && aligned && g.beta == 0.0f &&
         b.k_c >= g.k && 4.0 * static_cast<double>(g.m * g.n) >= min_bytes;
}

GemmStep plan_generated_gemm(GemmStep g, std::int64_t group, int threads, std::vector<KernelDesc>& kernels,
                             bool recurrent, const CacheSizes& caches) {
  if (group < 1 || g.n % group != 0)
    throw Error(fmt::format("gemm '{}': {} columns do not split into groups of {}", g.what, g.n, group));
  if (g.c_whole_vectors && (group != g.n || g.ldc < g.c_columns_written()))
    throw Error(fmt::format("gemm '{}': whole vectors of C need one group and rows of {} floats, got {} and {}",
                            g.what, g.c_columns_written(), group, g.ldc));
  GemmBlocking& b = g.blocking;
  if (b.bf16) return plan_bf16_gemm(std::move(g), group, threads, kernels, /*shared=*/!recurrent, caches);
  const std::int64_t b_share_bytes = recurrent ? g.k * g.n * static_cast<std::int64_t>(sizeof(float)) / threads : 0;
  // A^T's rows (read in place or packed) are adjacent floats.
  const std::int64_t a_row_bytes = g.trans_a ? 0 : g.lda * static_cast<std::int64_t>(sizeof(float));
  b = choose_blocking(g.m, g.k, group, threads, g.blocking.packed_b, caches, /*shared=*/!recurrent, b_share_bytes,
                      a_row_bytes);
  b.pack_a = copies_transposed_a(g, b.k_c, caches);
  b.stream_c = !recurrent && streams_c(g, b, caches);
  add_gemm_kernels(g, group, KernelKind::gemm, kernels, [&](KernelDesc& d) {
    d.unroll = 4;
    d.stream_c = b.stream_c && !d.beta;
    d.next_b_lines = static_cast<std::uint8_t>(b.next_panel_lines);
    d.a_row_stride = static_cast<std::uint32_t>(b.pack_a ? 1 : g.a_row_step());
    d.a_k_stride = static_cast<std::uint32_t>(b.pack_a ? b.m_r : g.a_k_step());
    d.b_k_stride = static_cast<std::uint32_t>(b.packed_b ? b.panel_columns() : g.ldb);
  });
  return g;
}

std::string_view to_string(Space s) {
  return s == Space::workspace ? "workspace" : s == Space::reserve ? "reserve" : "packed";
}

int WorkspacePlan::add(std::string name, Space space, std::size_t bytes) {
  std::size_t& end = this->bytes(space);
  regions.push_back({std::move(name), space, end, bytes});
  end = align_to_region(end + bytes);
  return static_cast<int>(regions.size()) - 1;
}

std::int64_t gx_row_floats(const RnnConfig& config, Isa isa) {
  const std::int64_t gh = std::int64_t{config.gates()} * config.hidden_size;
  return isa == Isa::avx512 ? (gh + 15) / 16 * 16 : gh;
}

KernelDesc gate_kernel_desc(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, Pass pass) {
  KernelDesc d;
  d.isa = static_cast<std::uint8_t>(isa == Isa::avx512 || isa == Isa::cuda ? isa : Isa::reference);
  d.cell = static_cast<std::uint8_t>(config.cell);
  d.pass = static_cast<std::uint8_t>(pass);
  d.training = pass == Pass::forward && mode == Mode::training;
  d.hidden = static_cast<std::uint32_t>(config.hidden_size);
  d.rows = static_cast<std::uint32_t>(shape.batch);
  // With a projection the kernel's h is o*tanh(c), [N, H] per step, projected afterwards.
  d.ld_h = static_cast<std::uint32_t>(config.proj_size > 0 ? config.hidden_size
                                                          : config.directions() * config.hidden_size);
  d.cols = d.hidden;
  if (config.cell == CellKind::lstm && config.clip > 0.0f) d.clip_bits = std::bit_cast<std::uint32_t>(config.clip);
  if (config.gate_clip > 0.0f) d.gate_clip_bits = std::bit_cast<std::uint32_t>(config.gate_clip);
  if (config.relu_alpha > 0.0f) d.relu_alpha_bits = std::bit_cast<std::uint32_t>(config.relu_alpha);
  d.peephole = config.peephole;
  d.input_forget = config.input_forget;
  const std::int64_t gx_row = gx_row_floats(config, isa);
  if (pass == Pass::forward && gx_row != d.gates() * config.hidden_size)
    d.gx_row_stride = static_cast<std::uint32_t>(gx_row);
  const std::int64_t vectors = (config.hidden_size + 15) / 16;
  d.unroll = d.isa_kind() == Isa::avx512
                 ? static_cast<std::uint32_t>(std::min<std::int64_t>(x64::max_gate_unroll(config.cell, pass), vectors))
                 : 1;
  return d;
}

Plan make_plan(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads,
               const GemmChooser& projection_gemm, const CacheSizes& caches, FpMath fpmath) {
  validate(config, shape);
  if (isa == Isa::detect) throw Error("make_plan needs a concrete isa, not 'detect'");
  if (threads < 1 || threads > kMaxThreads)
    throw Error(fmt::format("threads must be in [1, {}], got {}", kMaxThreads, threads));
  if (!caches.valid())
    throw Error(fmt::format("caches must have an L1d of at least 1 KiB and an L2 no smaller and at most 4 GiB, "
                            "got L1d {} L2 {} bytes",
                            caches.l1d, caches.l2));
  return Planner(config, shape, mode, isa, threads, projection_gemm, caches, fpmath).build();
}

}  // namespace rnnjit
