// rnnjit: the CPU executor. It walks a Plan's stages, calling the generated GEMMs (or OpenBLAS)
// and the compiled gate kernels inside each recurrence, on the process's ThreadTeam. It
// decides nothing: every size, operand, kernel and thread split comes from the plan.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "codegen/plan.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit {

// Addresses of the buffers a plan's operands name (workspace/reserve/packed are byte bases).
struct Bindings {
  std::array<const float*, kBufferCount> buffers{};
  std::byte* workspace = nullptr;
  std::byte* reserve = nullptr;
  std::byte* packed = nullptr;
  const std::int32_t* lengths = nullptr;  // variable sequence lengths [N], or null: all T
  std::uint64_t dropout_seed = 0;

  void bind(Buffer b, const float* p) { buffers[static_cast<std::size_t>(b)] = p; }
};

// Thread tid's contiguous share [first, second) of `count` items split over `threads`.
inline std::pair<std::int64_t, std::int64_t> share(std::int64_t count, int tid, int threads) {
  return {count * tid / threads, count * (tid + 1) / threads};
}

// The rows of a chunk of an OpenBLAS GEMM of m rows shared by `threads` (Executor::blas_rows):
// at least four chunks per thread where that leaves 16 rows or more, at most 256 rows (each
// call packs B anew, so a chunk must be large beside B).
inline std::int64_t blas_chunk_rows(std::int64_t m, int threads) {
  return std::clamp<std::int64_t>((m + 4 * threads - 1) / (4 * threads), 16, 256);
}

// Returns this thread's AMX tiles to their initial state (tilerelease); only where AMX is usable.
void release_amx_tiles();
// The AMX kernel (bf16 or int8) whose tile configuration this thread's tiles hold (null after a
// release): a kernel called again loads none (its arguments' `configured`).
const CompiledKernel*& amx_configured_kernel();

class Executor {
 public:
  Executor(std::shared_ptr<const Plan> plan, std::vector<std::shared_ptr<const CompiledKernel>> kernels);

  const Plan& plan() const { return *plan_; }

  // accumulate: GEMMs and column sums that would overwrite their output add to it instead.
  void run(const std::vector<Stage>& stages, const Bindings& bindings, bool accumulate = false) const;

 private:
  float* resolve(const Operand& o, const Bindings& b) const;
  std::byte* region_bytes(int region, const Bindings& b) const;
  // RNNJIT_PROFILE: which call and stage a lane's steps belong to (the thread that logs them).
  struct StepProfile {
    const char* call;
    std::size_t stage;
  };
  const char* call_name(const std::vector<Stage>& stages) const;
  // Thread `tid` of `threads` does its share of each step, meeting the others after each (and
  // with `profile`, logs each step's time once they have).
  void run_lane(const std::vector<Step>& lane, const Bindings& b, bool accumulate, int tid, int threads,
                const StepProfile* profile = nullptr) const;
  // Variable lengths: the rows of a GEMM that belong to finished sequences
  // (GemmStep::finished); without lengths, none.
  struct FinishedRows {
    const std::int32_t* lengths = nullptr;
    std::int64_t sequences = 0;  // row r is (t, n) = (r / sequences, r % sequences)
    // Whether rows [r0, r1) all are (inline: a GEMM asks at every tile, mostly without lengths).
    bool all(std::int64_t r0, std::int64_t r1) const { return lengths && all_past_end(r0, r1); }
    bool all_past_end(std::int64_t r0, std::int64_t r1) const;
  };
  // A GEMM step's call: C = op(A) op(B) + beta C over C's first `rows` rows (of g.m)
  // and the first `k` of g.k (B, when packed, keeps g.k rows per panel).
  struct GemmCall {
    const float* a = nullptr;
    const float* b = nullptr;
    float* c = nullptr;
    float beta = 0.0f;
    std::int64_t rows = 0, k = 0;
    // Of the row blocks that hold the first `rows` rows, those made only of `finished` rows are
    // not computed (stored as zeros where VariableLengths::rows_zero says the product is zero
    // and C is overwritten).
    FinishedRows finished;
    float* a_panels = nullptr;  // g.blocking.pack_a: A's panels go here
    // A recurrence's step: walk this thread's panels last to first (every other step). The
    // panels the step before read last are then still in L2 when this one starts on them,
    // where a thread's share of W_hh is larger than L2 and would otherwise all come from L3.
    bool backwards = false;
  };
  // Thread `tid` of `threads` (of this lane) computes its panels of a generated GEMM (static:
  // the same columns every time, which a recurrence's gate kernel then reads without a
  // barrier), or with `shared`, whichever (m block, panel) units it claims first
  // (ThreadTeam::shared_loop).
  void gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared = false) const;
  // The same on AMX-BF16 tiles (g.blocking.bf16; runtime/executor_bf16.cpp): A is first rounded
  // to bf16 rows in call.a_panels, by all threads together (shared) or each into its own copy.
  void bf16_gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const;
  // Packs B into bf16 tiles (PackStep with a bf16 blocking): W^T, or B's own rows (those past
  // a sequence's length, with PackStep::sequences, as zeros).
  void pack_bf16(const PackStep& p, const float* w, float* out, const std::int32_t* lengths, int tid,
                 int threads) const;
  // The same on int8 (g.blocking.int8; runtime/executor_int8.cpp): A is first quantized to
  // uint8 rows and their scales in call.a_panels, by all threads together (shared) or each
  // into its own copy; the kernels dequantize into C.
  void int8_gemm(const GemmStep& g, const GemmCall& call, int tid, int threads, bool shared) const;
  // Quantizes W^T into int8 panels with their compensations and scales (PackStep with an int8
  // blocking; kernels/int8_reference.hpp's pack_panel).
  void pack_int8(const PackStep& p, const float* w, float* out, int tid, int threads) const;
  // A product through OpenBLAS (every row: blocks of finished rows are computed too).
  static void blas_gemm(const GemmStep& g, const GemmCall& call);
  // An OpenBLAS GEMM: on one thread as it is, or on several by chunks of rows that the threads
  // claim as they go, each chunk one single-threaded OpenBLAS call.
  void blas_rows(const GemmStep& g, const GemmCall& call, int threads) const;
  // A one-shot GEMM step (not a recurrence's), generated or OpenBLAS.
  void gemm_step(const GemmStep& g, const Bindings& b, float beta, int tid, int threads) const;
  void copy(const CopyStep& c, const Bindings& b, int tid, int threads) const;
  // Sums of the rows (times factor's) into dst and also_dst: out = beta * out + sum.
  void column_sum(const ColumnSumStep& s, const Bindings& b, float beta, int tid, int threads) const;
  void mask(const MaskStep& m, const Bindings& b, int tid, int threads) const;
  void dropout(const DropoutStep& d, const Bindings& b, int tid, int threads) const;
  void pack(const PackStep& p, const Bindings& b, int tid, int threads) const;
  // Thread `tid`'s part of a recurrence: its gate kernel (null: none) and first hidden unit;
  // part 1: its n kernel of a GRU with the reset before.
  struct GateShare {
    const CompiledKernel* kernel;
    std::int64_t col0, cols;
  };
  GateShare gate_share(const RecurrenceStep& r, int tid, int part = 0) const;
  // The output columns of a GEMM that thread `tid` computes.
  std::pair<std::int64_t, std::int64_t> gemm_columns(const GemmStep& g, int tid) const;
  // One product of a recurrence's per-step GEMM (its own beta), on this thread's share, for
  // the first `rows` rows of A and C (at least: a row block is computed whole). `step`: the
  // step's index in the loop, whose parity sets the order of the panels (GemmCall::backwards).
  void step_gemm(const GemmStep& g, const Bindings& bind, std::int64_t step, std::int64_t rows, const float* a,
                 const float* b, float* c, int tid, int threads) const;
  // What step_gemm writes where A is zero (and beta 0): zeros in this thread's columns of C's
  // first `rows` rows.
  void zero_product(const GemmStep& g, std::int64_t rows, float* c, int tid) const;
  // The address of a time-indexed operand at time `time`, column `col` (null if unbound).
  float* timed(const Timed& t, std::int64_t time, const Bindings& b, std::int64_t col = 0) const;
  void forward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const;
  void backward_recurrence(const RecurrenceStep& r, const Bindings& b, int tid, int threads) const;
  // The named steps behind them: run_lane's dispatch over Step (runtime/executor.cpp), a
  // thread's walk of a generated GEMM's tiles (executor_gemm.cpp), a thread's part of a forward
  // or backward recurrence (executor_recurrence.cpp).
  struct StepRunner;
  struct GemmWalk;
  struct ForwardRecurrence;
  struct BackwardRecurrence;

  std::shared_ptr<const Plan> plan_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;
  bool uses_amx_ = false;  // the plan has AMX kernels (whose tiles each stage releases)
};

}  // namespace rnnjit
