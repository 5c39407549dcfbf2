// rnnjit: the Plan, plain data that fully describes a prepared RNN call: every GEMM with its
// sizes, leading dimensions and operands, every recurrence (time loop) with its gate kernel's
// descriptor, and the WorkspacePlan of named regions. The planner (codegen/planner.hpp) makes
// it without emitting any code; the executor (runtime/) only walks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "codegen/gemm_blocking.hpp"
#include "codegen/kernel_desc.hpp"
#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

// Where an operand lives: a caller's tensor, the weights, or a region of workspace/reserve.
enum class Buffer : std::uint8_t {
  none, x, y, hx, cx, hy, cy, dy, dhy, dcy, dx, dhx, dcx, weights, dweights, workspace, reserve, packed
};
inline constexpr int kBufferCount = 18;
std::string_view to_string(Buffer b);

inline constexpr std::size_t kRegionAlignment = 64;
// v rounded up to a multiple of kRegionAlignment (an offset, a size or an address).
inline constexpr std::uintptr_t align_to_region(std::uintptr_t v) {
  return (v + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
}

// workspace: scratch, free between calls; reserve: kept from forward training to backward;
// packed: the weights in the generated GEMM's panel layout (cuDNN's "weight space").
enum class Space : std::uint8_t { workspace = 0, reserve = 1, packed = 2 };
std::string_view to_string(Space s);

struct Region {
  std::string name;     // e.g. "gates.l0.d1"
  Space space;
  std::size_t offset;   // bytes from the start of its buffer, kRegionAlignment-aligned
  std::size_t size;     // bytes
};

struct WorkspacePlan {
  std::vector<Region> regions;
  std::size_t workspace_bytes = 0;
  std::size_t reserve_bytes = 0;
  std::size_t packed_bytes = 0;

  int add(std::string name, Space space, std::size_t bytes);  // returns the region's index
  std::size_t& bytes(Space s) { return s == Space::workspace ? workspace_bytes : s == Space::reserve ? reserve_bytes : packed_bytes; }
};

// A float operand: `offset` elements past the start of its region (workspace/reserve) or of
// the caller's buffer.
struct Operand {
  Buffer buffer = Buffer::none;
  int region = -1;
  std::int64_t offset = 0;
  bool operator==(const Operand&) const = default;
};

// An operand that moves with the time step t (sequence order): base + t * t_stride elements.
struct Timed {
  Operand base;
  std::int64_t t_stride = 0;
};

// A [rows, cols] block of an operand (rows ld apart) that a GEMM tests for all zeros.
struct RowBlock {
  Operand at;
  std::int64_t rows = 0, cols = 0, ld = 0;
};

// Variable lengths: which rows of a GEMM belong to finished sequences and are left out. Rows
// are (t, n) pairs, sequence-major: row t * sequences + n.
struct VariableLengths {
  // C's row blocks made only of rows of finished sequences are not computed. Either nothing
  // reads those rows (an input projection: the gate kernel's results there are replaced by the
  // carried state), or, with rows_zero, A's rows there are zero (gate gradients) and so are
  // C's: stored as zeros where C is overwritten, left where C is added to (an input gradient).
  bool rows_skipped = false;
  bool rows_zero = false;
  // Weight gradients: the sum over k runs over (t, n) rows, laid out as above, and the rows of
  // finished sequences add nothing. B there holds whatever the caller left past a length (x's
  // padding, NaN included: zero gate gradients times NaN are NaN), so it is never read: B is
  // zeroed there as it is packed (PackStep::sequences) or, unpacked, copied into b_masked
  // (laid out as B) with those rows zeroed.
  bool k_rows_skipped = false;
  Operand b_masked;
  std::int64_t sequences = 0;  // N, with rows_skipped or k_rows_skipped
};

// dW_hh sums over h_prev, whose rows of h0 [block.rows, block.cols] are the first block.rows
// rows of K (a forward direction), or the last (`last`: a reversed direction; at T = 1 they are
// all of K): where h0 is all zeros (a call without hx), the sum leaves them out, and C is zeros
// where K is then empty. Leading rows are left out only where the GEMM reads A in place or
// packs it itself (not from panels another GEMM packed for all of K).
struct H0Rows {
  RowBlock block;  // rows 0: none left out
  bool last = false;
};

// Row-major C = op(A) op(B) + beta C with op(X) = X or X^T; alpha is always 1.
struct GemmStep {
  std::string what;  // e.g. "input projection l0 d0"
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  Operand a, b, c;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
  GemmBlocking blocking;  // generated GEMM tiling and its kernels; empty: OpenBLAS
  Operand a_panels;       // blocking.pack_a: workspace for k_c x (row blocks * m_r) floats
  // blocking.pack_a: the A panels of one k block at a time, or of all of K (a_panel_elements()),
  // packed here and kept for the next GEMM of the lane, which multiplies the same A with the
  // same m_r and k_c (dW_hh after dW_ih: both sum over the gate gradients) and packs nothing.
  enum class APanels : std::uint8_t { per_k_block, keep_for_next, packed_before };
  APanels a_panels_use = APanels::per_k_block;
  // Variable lengths: the rows of finished sequences this GEMM leaves out (none by default).
  VariableLengths finished;
  // C's rows have room for the last panel's whole vectors (one group, ldc >= n rounded up to
  // 16): its tiles write them all, the columns past n as zeros (B's packed panels are zero
  // there), so that no tile needs a masked tail and C can be streamed (a padded gx).
  bool c_whole_vectors = false;
  // The columns of each row of C that the GEMM writes.
  std::int64_t c_columns_written() const { return c_whole_vectors ? (n + 15) / 16 * 16 : n; }
  // Where element (i, k) of op(A) lies in A, read in place: i * a_row_step() + k * a_k_step().
  std::int64_t a_row_step() const { return trans_a ? 1 : lda; }
  std::int64_t a_k_step() const { return trans_a ? lda : 1; }
  // dW_hh: the rows of K that h0 makes (left out where h0 is all zeros; none by default).
  H0Rows h0;
};

// Floats of a GEMM's A panels (blocking.pack_a): one k block, or all of K where they are shared.
inline std::int64_t a_panel_elements(const GemmStep& g) {
  return a_panel_elements(g.blocking, g.m, g.k, g.a_panels_use != GemmStep::APanels::per_k_block);
}

// Packs a GEMM's B into the generated GEMM's panels (codegen/gemm_blocking.hpp) so that it
// streams contiguously. transpose: src is W [groups*group, k] (one row per output column,
// B = W^T: the weights of a forward GEMM); else src is B itself, [k, groups*group] with ld.
struct PackStep {
  std::string what;
  Operand src, dst;
  std::int64_t k = 0, groups = 0;
  GemmBlocking blocking;  // n_r and group define the layout
  bool transpose = true;
  std::int64_t ld = 0;    // row stride of a plain (not transposed) src
  // Variable lengths: a plain src's row kk is (t, n) = (kk / sequences, kk % sequences), and
  // the rows of finished sequences are packed as zeros (VariableLengths::k_rows_skipped); 0: none.
  std::int64_t sequences = 0;
};

// dst[b, r, 0:cols] = src[b, r, 0:cols] (+ plus[b, r, 0:cols]) for r < rows, b < blocks (rows
// ld_* apart, blocks block_* apart: [T, N, w] <-> [N, T, w] is blocks = T, rows = N); a `none`
// source reads as zeros (so with no plus either, zeros are written).
struct CopyStep {
  std::string what;
  Operand src, dst;
  std::int64_t rows = 0, cols = 0, ld_src = 0, ld_dst = 0;
  bool optional_src = false;  // the caller may omit src (then zeros); e.g. hx
  bool optional_dst = false;  // the caller may omit dst (then skipped); e.g. hy
  std::int64_t blocks = 1, block_src = 0, block_dst = 0;
  // When set: dst = src + plus, plus's rows laid out like src's (sum_directions: y = h_fwd + h_bwd
  // in one pass, plus being the other direction's columns of the same rows).
  Operand plus;
};

// Variable-length sequences: zeroes row (t, n) of dst, at dst + t*t_stride + n*n_stride, for
// every t at or past element n's length (nothing when the call has no lengths).
struct MaskStep {
  std::string what;
  Operand dst;
  std::int64_t steps = 0, batch = 0, cols = 0, t_stride = 0, n_stride = 0;
};

// Dropout between layers over rows x cols elements (element index r*cols + j, see
// kernels/dropout.hpp). Forward: mask[e] = keep, dst = src * keep / (1-p). Backward, in place:
// dst *= mask / (1-p). The mask is one byte per element in a reserve region.
struct DropoutStep {
  std::string what;
  Pass pass = Pass::forward;
  std::int64_t layer = 0;
  float p = 0.0f;
  Operand src, dst;
  int mask_region = -1;
  std::int64_t elements = 0;
};

// dst[j] (+)= sum over r < rows of src[r, j], j < cols (bias gradients), or with a factor
// operand of sum src[r, j] * factor[r, j] (peephole gradients: gate gradient times c).
struct ColumnSumStep {
  std::string what;
  Operand src, dst;
  std::int64_t rows = 0, cols = 0, ld_src = 0;
  float beta = 0.0f;
  Operand factor;
  std::int64_t ld_factor = 0;
  // Optional: gets the same sums, with the same beta (a cell whose two biases see one
  // gradient, db_hh = db_ih: one pass over the gate gradients instead of two).
  Operand also_dst;
};

// A recurrence's gate kernel and its split across threads: every step, thread i runs the gate
// kernel thread_kernels[i] (-1: none) on the hidden units from thread_units[i] (its share of the
// GEMM that produces or consumes the gate kernel's columns). OpenBLAS plans: one thread, all H
// units.
struct GateSplit {
  int kernel = -1;  // over all rows and units: index into Plan::kernels
  std::vector<int> thread_kernels;
  std::vector<std::int64_t> thread_units;
};

// LSTM with a projection (P < H): the gate kernel's o * tanh(c) is [N, H] and h is projected
// from it, h = (o * tanh(c)) W_hr^T. One struct serves both passes: `gemm` is the pass's own
// product, and each pass sets only its own operands (forward cell_out; backward dh_proj,
// dcell and zeros).
struct Projection {
  // Forward, after the gate kernels: h = cell_out W_hr^T (a and c per step). Backward, before
  // them: dcell = dh_proj W_hr (a per step).
  GemmStep gemm;
  // Forward: where the gate kernel writes o * tanh(c) (per step in training, kept for dW_hr).
  Timed cell_out;
  // Backward: dh_proj = dh_carry + dy, formed first (per step, kept for dW_hr); its product
  // dcell feeds the gate kernel as its dy, with `zeros` [N, H] as its dh_carry (h's gradient
  // reaches the cell only through the projection); the recurrent GEMM then writes the new
  // dh_carry.
  Timed dh_proj;
  Operand dcell, zeros;
};

// GRU with the reset before: a step is two GEMMs and two gate kernels. Forward: the recurrence's
// gemm covers the r,z columns of gh and the part-0 kernels write reset_h = r * h_prev and z;
// after a barrier `gemm` writes gh's n columns from reset_h and the part-1 kernels write h.
// Backward: the part-0 kernels write dz, dn and dh_carry = dh z; after a barrier `gemm` forms
// d_reset_h = dn W_hn, the part-1 kernels dr and dh_carry += d_reset_h r; after another, the
// recurrence's gemm adds [dr, dz] W_hh[r,z rows] into dh_carry.
struct ResetBefore {
  GemmStep gemm;      // forward: gh's n columns = reset_h W_hn^T; backward: d_reset_h = dn W_hn
  GateSplit part1;    // the part-1 kernels, split like `gemm` (backward the part-0 kernels too)
  Timed reset_h;      // forward: r * h_prev [N, ld_state] (per step in training, kept for dW_hn)
  Operand z;          // forward: [N, H]
  Operand d_reset_h;  // backward: [N, H]
};

// The time loop of one layer and direction. Forward, at processing step s (t = s, or T-1-s
// when reverse): gh = h_prev W_hh^T (gemm, a = h_prev), then the gate kernel with
// h_prev/c_prev = h/c at the previous time (h_init/c_init at the first step).
// Backward walks the steps the other way: the gate kernel, then dh_carry (+)= dgates W_hh.
// An LSTM with a projection and the reset-before GRU add the parts of their own.
struct RecurrenceStep {
  std::string what;
  Pass pass = Pass::forward;
  std::int64_t layer = 0;
  int direction = 0;
  bool reverse = false;
  std::int64_t steps = 0;  // T
  std::int64_t batch = 0;  // N: the rows this step runs (all of the call's, or a lane's slice)
  std::int64_t batch_begin = 0;  // the call's row its first row is (its sequence length's index)
  std::int64_t state = 0;  // S, the width of h (P with a projection, else H)
  std::int64_t ld_state = 0;  // row stride of h and h_init (D*S: both directions' h side by side)
  std::int64_t ld_dy = 0;     // backward: row stride of dy (D*S; S where the directions are summed)
  // The gate kernel (the reset-before GRU's part 0), split like the GEMM whose output columns
  // are its hidden units: gemm forward; backward gemm, projection->gemm or reset_before->gemm.
  GateSplit gate;
  GemmStep gemm;           // per step; its a (fwd: h_prev, bwd: gates at t) is filled per step
  Timed gx, h, c, gates, dy;
  Operand gh, bias_ih, bias_hh, h_init, c_init, dh_carry, dc_carry;
  // Forward: the caller's initial h that h_init is copied from (its rows of hx). A call that
  // binds none starts from zeros, and the first step's recurrent products (of h_init, and of
  // r * h_init) are zero: the executor writes zeros for them instead of multiplying.
  Operand hx;
  // Backward: the caller's dhx that dh_carry ends in (its rows). A call that binds none wants
  // nothing from the last step's recurrent product (dh_carry's only reader then): not computed.
  Operand dhx;
  Operand peephole;  // LSTM with peepholes: [3, H] P_i, P_f, P_o
  // Variable lengths: an element past its length keeps its state (forward: h and c carried
  // from the previous step; backward: the gradients carried unchanged, gate gradients zero).
  // [N, 2H] of scratch for the rows being carried.
  Operand carry_save;
  std::optional<Projection> projection;     // LSTM with a projection
  std::optional<ResetBefore> reset_before;  // GRU with the reset before
};

using Step = std::variant<GemmStep, CopyStep, ColumnSumStep, RecurrenceStep, PackStep, MaskStep, DropoutStep>;

// Steps of one lane run in order; the lanes of a stage run concurrently (the two directions
// of a bidirectional layer), each on one thread; a stage of one lane runs on Plan::threads
// threads that share each step's work and meet at a barrier after it. Stages run in order.
struct Stage {
  std::vector<std::vector<Step>> lanes;
};

struct Plan {
  RnnConfig config;
  Shape shape;
  Mode mode = Mode::inference;
  Isa isa = Isa::reference;
  int threads = 1;
  CacheSizes caches;               // the per-core caches the generated GEMMs are blocked for
  FpMath fpmath = FpMath::strict;  // bf16: the GEMMs on packed weights run on bf16 operands (GemmBlocking::bf16)
  Bf16Unit bf16_unit = Bf16Unit::amx;  // with fpmath bf16: which unit runs them
  // int8_dynamic: the GEMMs on packed weights run on int8 (GemmBlocking::int8), on int8_unit.
  Quantize quantize = Quantize::none;
  Int8Unit int8_unit = Int8Unit::avx512_vnni;
  std::vector<std::string> notes;  // decisions worth telling the user (e.g. fallbacks)
  std::vector<KernelDesc> kernels;
  WorkspacePlan workspace;
  int lengths_region = -1;  // training: the call's sequence lengths (N int32) kept for backward (GPU inference: a workspace region)
  std::vector<Stage> pack_weights, forward, backward_data, backward_weights;
};

// Most lanes any stage of the forward and backward passes has (1 at least): the concurrent
// streams a device walk needs, and the recurrences that may run at once.
inline int most_lanes(const Plan& plan) {
  std::size_t lanes = 1;
  for (const auto* stages : {&plan.forward, &plan.backward_data, &plan.backward_weights})
    for (const Stage& s : *stages) lanes = lanes < s.lanes.size() ? s.lanes.size() : lanes;
  return static_cast<int>(lanes);
}

std::string to_text(const Plan& plan);
std::string to_json(const Plan& plan);

}  // namespace rnnjit
