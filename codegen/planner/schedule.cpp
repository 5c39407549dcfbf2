#include "codegen/planner/schedule.hpp"

#include "codegen/register_budgets.hpp"

namespace rnnjit::planner {
namespace {

// Each constant's measurements: docs/perf-notes.md, "Planner thresholds".
// Below this much GEMM work per thread (the whole call, every layer) a plan runs on one thread:
// waking the workers costs more than a few MFLOP save.
constexpr double kMinFlopsPerThread = 10e6;
// ... unless the first layer's weights are this large per thread: with a few rows the GEMMs
// stream weights, and two cores read memory nearly twice as fast as one.
constexpr double kMinWeightBytesPerThread = 1 << 20;
// GEMM FLOPs a time step of one direction must give each thread before the step is split by
// hidden units, the threads meeting at a barrier after every step.
constexpr double kMinStepFlopsPerThread = 100e3;
// Batch rows up to which two directions whose W_hh streams from L3 take turns: each weight byte
// then serves at most 2 FMAs, so a step waits on W_hh whatever the split.
constexpr std::int64_t kMaxRowsWeightBound = 4;
// ... and up to this many where a direction's W_hh is over a quarter of the L3: as two lanes,
// both directions' weights stream through L3 at once and it keeps too little of either.
constexpr std::int64_t kMaxRowsSharingL3 = 8;
// Rows per thread from which a recurrence whose weights are many times L2 still splits by rows:
// each byte of W_hh then serves enough FMAs that streaming all of it costs less than a barrier.
constexpr std::int64_t kSliceRowsStreamingWeights = 48;

// Packed weights one core's L2 keeps from one step to the next beside h and the gate inputs.
double l2_weight_bytes(const CacheSizes& caches) { return 0.75 * static_cast<double>(caches.l2); }
double l3_crowded_weight_bytes(const CacheSizes& caches) { return 0.25 * static_cast<double>(caches.l3); }
// Recurrent weights up to which a recurrence splits by rows: a little more than L2 ...
double row_split_weight_bytes(const CacheSizes& caches) { return 1.25 * static_cast<double>(caches.l2); }
// ... or, with kSliceRowsStreamingWeights rows a thread, this much.
double row_split_streamed_weight_bytes(const CacheSizes& caches) { return 8.0 * static_cast<double>(caches.l2); }

// A time step's GEMM FLOPs in one direction of layer l (input and recurrent products).
double layer_step_flops(const RnnConfig& config, const Shape& shape, std::int64_t l) {
  return 2.0 * static_cast<double>(shape.batch) * config.gates() * static_cast<double>(config.hidden_size) *
         static_cast<double>(config.layer_input_size(l) + config.state_size());
}

// Bytes of one direction's W_hh.
double w_hh_bytes(const RnnConfig& config) {
  return 4.0 * static_cast<double>(config.gates() * config.hidden_size) * static_cast<double>(config.state_size());
}

}  // namespace

int plan_threads(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads) {
  // Training does three times the forward GEMMs' work, and moves the weights three times too
  // (packs them twice, writes their gradients).
  const double passes = mode == Mode::training ? 3.0 : 1.0;
  // Layers above the first take the layer below's output, often wider than x.
  double flops = 0;
  for (std::int64_t l = 0; l < config.num_layers; ++l)
    flops += layer_step_flops(config, shape, l) * static_cast<double>(shape.seq_len) * config.directions() * passes;
  // The first layer's weights (each layer reads its own, one layer after the other).
  const double weight_bytes =
      4.0 * static_cast<double>(config.directions()) *
      static_cast<double>(config.gates() * config.hidden_size * (config.input_size + config.state_size()) +
                          config.proj_size * config.hidden_size) *
      passes;
  // One direction with too few rows to split by rows and small steps: split by hidden units, the
  // barrier after each step would cost more than the half step it saves.
  const bool small_steps = config.directions() == 1 && shape.batch < kMinSliceRows * threads &&
                           layer_step_flops(config, shape, 0) < kMinStepFlopsPerThread * threads;
  const bool enough_work = flops >= kMinFlopsPerThread * threads || weight_bytes >= kMinWeightBytesPerThread * threads;
  return generates_x64(isa) && !small_steps && enough_work ? threads : 1;
}

bool directions_take_turns(const RnnConfig& config, const Shape& shape, int threads, const CacheSizes& caches) {
  // More rows keep their lanes also where a direction's W_hh is over what one core's L2 keeps:
  // the part a lane streams from L3 costs less than turns' barrier every step.
  const double w_hh = w_hh_bytes(config);
  const bool weight_bound = shape.batch <= kMaxRowsWeightBound ||
                            (shape.batch <= kMaxRowsSharingL3 && w_hh > l3_crowded_weight_bytes(caches));
  return config.directions() == 2 && threads > 1 && w_hh > l2_weight_bytes(caches) && weight_bound;
}

int batch_slices(const RnnConfig& config, const Shape& shape, Isa isa, int threads, const CacheSizes& caches) {
  // One direction's rows over all threads, or each of two directions' over half of them (they
  // are otherwise a lane each, and threads beyond two would idle). A split by units makes every
  // step wait for the slower core and, where H is a few vectors, gives the threads unequal shares.
  const double recurrent_bytes =
      4.0 * static_cast<double>(config.gates() * config.hidden_size * config.state_size() +
                                config.proj_size * config.hidden_size);
  const int slices = threads / config.directions();
  const bool rows_split =
      generates_x64(isa) && slices > 1 && shape.batch >= kMinSliceRows * slices &&
      (recurrent_bytes <= row_split_weight_bytes(caches) ||
       (shape.batch >= kSliceRowsStreamingWeights * slices && recurrent_bytes <= row_split_streamed_weight_bytes(caches)));
  return rows_split ? slices : 1;
}

Schedule choose_schedule(const RnnConfig& config, const Shape& shape, Mode mode, Isa isa, int threads,
                         const CacheSizes& caches) {
  Schedule s;
  s.threads = plan_threads(config, shape, mode, isa, threads);
  s.split_directions = directions_take_turns(config, shape, s.threads, caches);
  s.batch_slices = batch_slices(config, shape, isa, s.threads, caches);
  return s;
}

}  // namespace rnnjit::planner
