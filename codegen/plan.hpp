// rnnjit: the Plan, plain data that fully describes a prepared RNN call: every GEMM with its
// sizes, leading dimensions and operands, every recurrence (time loop) with its gate kernel's
// descriptor, and the WorkspacePlan of named regions. The planner (codegen/planner.hpp) makes
// it without emitting any code; the executor (runtime/) only walks it.
#pragma once

#include <cstddef>
#include <cstdint>
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
};

// An operand that moves with the time step t (sequence order): base + t * t_stride elements.
struct Timed {
  Operand base;
  std::int64_t t_stride = 0;
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
};

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
};

// dst[r, 0:cols] = src[r, 0:cols] for r < rows; a `none` source writes zeros.
struct CopyStep {
  std::string what;
  Operand src, dst;
  std::int64_t rows = 0, cols = 0, ld_src = 0, ld_dst = 0;
  bool optional_src = false;  // the caller may omit src (then zeros); e.g. hx
  bool optional_dst = false;  // the caller may omit dst (then skipped); e.g. hy
};

// dst[j] (+)= sum over r < rows of src[r, j], j < cols (bias gradients).
struct ColumnSumStep {
  std::string what;
  Operand src, dst;
  std::int64_t rows = 0, cols = 0, ld_src = 0;
  float beta = 0.0f;
};

// The time loop of one layer and direction. Forward, at processing step s (t = s, or T-1-s
// when reverse): gh = h_prev W_hh^T (gemm, a = h_prev), then the gate kernel with
// h_prev/c_prev = h/c at the previous time (h_init/c_init at the first step).
// Backward walks the steps the other way: the gate kernel, then dh_carry (+)= dgates W_hh.
struct RecurrenceStep {
  std::string what;
  Pass pass = Pass::forward;
  std::int64_t layer = 0;
  int direction = 0;
  bool reverse = false;
  std::int64_t steps = 0;  // T
  std::int64_t batch = 0;  // N
  int kernel = -1;         // index into Plan::kernels (OpenBLAS plans: one thread, all H columns)
  // Generated plans split every step across threads: thread i runs the gate kernel
  // thread_kernels[i] on the hidden units gemm.blocking.thread_columns(i) (-1: none).
  std::vector<int> thread_kernels;
  GemmStep gemm;           // per step; its a (fwd: h_prev, bwd: gates at t) is filled per step
  Timed gx, h, c, gates, dy;
  Operand gh, bias_ih, bias_hh, h_init, c_init, dh_carry, dc_carry;
};

using Step = std::variant<GemmStep, CopyStep, ColumnSumStep, RecurrenceStep, PackStep>;

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
  std::vector<std::string> notes;  // decisions worth telling the user (e.g. fallbacks)
  std::vector<KernelDesc> kernels;
  WorkspacePlan workspace;
  std::vector<Stage> pack_weights, forward, backward_data, backward_weights;
};

std::string to_text(const Plan& plan);
std::string to_json(const Plan& plan);

}  // namespace rnnjit
