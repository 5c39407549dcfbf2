// rnnjit: how a generated GEMM is cut into microkernel calls. The planner chooses the blocking
// (tile rows m_r, tile vectors n_r, k block k_c) with a small cost model; the executor and the
// packing code use the same helpers below, so the plan fully determines the work.
//
// Columns are split into groups (e.g. one gate's H columns) and each group into panels of
// 16*n_r columns; no panel straddles a group boundary. A recurrence's threads split every group
// in the same contiguous ranges of whole vectors (so a thread owns the same hidden units of
// every gate; vector_split), a one-shot GEMM's threads claim panels as they go. A packed B
// holds, for group g and panel p, K rows of 16*n_r floats (zero padded):
//   packed[((g * panels_per_group + p) * K + k) * 16*n_r + c] = W[g*group + p*16*n_r + c][k]
// except that a panel which thread boundaries cut holds its parts one after another, the part
// of columns [first, end) of the panel as K rows of end - first floats from K * first on.
#pragma once

#include <cstdint>
#include <algorithm>
#include <utility>
#include <vector>

#include "codegen/cache_sizes.hpp"
#include "codegen/int8_layout.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

struct GemmBlocking {
  std::int64_t m_r = 0;    // rows of a tile; 0 means "not generated" (OpenBLAS runs the GEMM)
  std::int64_t n_r = 0;    // vectors of a tile (16 columns each: a zmm, or two ymm on AVX2)
  std::int64_t k_c = 0;    // k block: B panels of k_c rows stay in L2
  std::int64_t m_c = 0;    // rows per m block (a multiple of m_r): that much of A stays in L2
                           // while every panel of B passes by
  std::int64_t group = 0;  // columns per group
  int threads = 1;         // threads splitting each group's panels
  bool packed_b = false;   // B is a packed weight buffer (layout above), else row-major with ldb
  // A transposed (A^T[i][k] = A[k][i], rows of A far apart) is first copied, one k block at a
  // time, into row-block panels [row block][k][m_r] in a workspace region, where the planner's
  // copies_transposed_a() says so (cores with two 512-bit FMAs a cycle; on Zen 4 a k block
  // spanning more than the TLB maps): the microkernel then streams it contiguously instead of
  // touching a line of another row at every k step. Else it is read in place (a_row_stride 1,
  // a_k_stride lda).
  bool pack_a = false;
  // A recurrence's step whose k_c x n_r panel of B cannot stay in L1: each k step also
  // prefetches the B row this many k steps ahead into L1 (0: none), so the FMAs do not wait on
  // L2 or L3 for it. One-shot GEMMs leave B's rows to the cores' prefetchers.
  std::int64_t b_lookahead = 0;
  // Packed B: each tile also prefetches into L2 this many lines of the panel its thread
  // multiplies next every unrolled k iteration (0: none), so that the panel is in L2 before the
  // first tile on it starts, instead of that tile waiting on L3 for all of it (its 320 bytes a
  // k step outrun what L3 delivers to a core). One-shot GEMMs: the panel of the unit the thread
  // likely claims next, a share of it per tile of the current unit (their 24 or so tiles cover
  // it at a line each). A recurrence's steps: the thread's next (group, panel) pair, where its
  // share of B streams from L3 and a panel serves two row blocks or more (one row block has no
  // time to hide the next panel behind).
  std::int64_t next_panel_lines = 0;
  // C's tiles are written with non-temporal stores (KernelDesc::stream_c): see streams_c().
  bool stream_c = false;
  // AMX-BF16 (Plan::fpmath bf16): B packed as bf16 tiles (bf16_packed_offset), A rounded to bf16
  // rows of bf16_k(K) into a_panels before the tiles read it; C and every sum stay FP32. m_r is
  // up to 32 rows (two 16-row A tiles), n_r 1 or 2 tiles of 16 columns, k_c all of bf16_k(K). The A
  // buffer holds a_copies copies of M rows: one that the threads fill together (a one-shot
  // GEMM), or one per thread (a recurrence's step, where every thread reads all of h).
  // AVX512_BF16 (bf16_unit avx512_bf16) reads the same packed panels and rounded rows with
  // vdpbf16ps on zmm registers: m_r x n_r sums, n_r up to 4 column tiles.
  bool bf16 = false;
  Bf16Unit bf16_unit = Bf16Unit::amx;
  std::int64_t a_copies = 1;
  // AMX-BF16: each k step also prefetches A's rows this many k tiles on into L1 (0: none).
  std::int64_t a_lookahead = 0;
  // int8 (Plan::quantize int8_dynamic; codegen/int8_layout.hpp): B packed as int8 panels with
  // their compensations and scales, A quantized per row into a_copies copies of M uint8 rows
  // of int8_k(K) and their scales before the tiles read it; C FP32. Tiles as AVX512_BF16's
  // (m_r x n_r sums in zmm registers, n_r up to 4 column tiles), k_c all of int8_k(K).
  bool int8 = false;
  Int8Unit int8_unit = Int8Unit::avx512_vnni;
  // Plan kernel indices: [row tail][column tail][beta]; -1 where that case cannot occur.
  int kernels[2][2][2] = {{{-1, -1}, {-1, -1}}, {{-1, -1}, {-1, -1}}};
  // A recurrence's step (not bf16): the threads split each group at whole vectors, not whole
  // panels, so that they reach the barrier after the same work: H = 800 in 32-column panels
  // splits 400 : 400 columns, not 416 : 384 (one thread streaming 4% more of W_hh, the other
  // waiting for it at every step). A panel that a thread boundary cuts is computed in parts,
  // each thread's by a narrower kernel (part_kernels); packed, the panel holds its parts one
  // after another, each [K][its columns], so that each thread streams only its own.
  bool vector_split = false;
  // vector_split: the kernels of the parts of cut panels, by the columns a part spans and the
  // floats a k row of it takes (its columns to the next cut or the panel's end, padding
  // included); [row tail][beta] as in kernels.
  struct PartKernels {
    std::int64_t width = 0, stride = 0;
    int kernels[2][2] = {{-1, -1}, {-1, -1}};
  };
  std::vector<PartKernels> part_kernels;

  bool generated() const { return m_r > 0; }
  std::int64_t panel_columns() const { return 16 * n_r; }
  std::int64_t panels_per_group() const { return (group + panel_columns() - 1) / panel_columns(); }
  std::int64_t row_blocks(std::int64_t m) const { return (m + m_r - 1) / m_r; }
  // Panels [first, second) of each group that thread `tid` computes (vector_split: the first
  // and the last may be parts of panels; panel_part()).
  std::pair<std::int64_t, std::int64_t> thread_panels(int tid) const;
  // Columns [first, second) of each group that thread `tid` computes.
  std::pair<std::int64_t, std::int64_t> thread_columns(int tid) const;
  // What thread `tid` computes of its panel p: columns [c0, c1) of the group, `first` columns
  // into the panel; packed, they lie in K rows of `stride` floats from K * first on (stride =
  // panel_columns() for a whole panel or a group's last one; part_end()).
  struct Part {
    std::int64_t c0, c1, first, stride;
  };
  Part panel_part(int tid, std::int64_t p) const;
  // Where the part of panel p that starts at its column `first` (0, or a thread boundary within
  // the panel) ends, in the panel's columns: at the next boundary, else at panel_columns().
  // Packed, the part starts K * first floats into the panel, a k row every (end - first).
  std::int64_t part_end(std::int64_t p, std::int64_t first) const;
  // The columns of a group at which thread boundaries cut panels (the packed layout's parts).
  std::vector<std::int64_t> cuts() const;
  // Where the part of panel q (counted over all groups) that starts at its column `first` lies
  // in a packed B of k rows, in floats: the panels one after another, each part of one [k][its
  // columns] from k * first on (a whole panel: first = 0).
  std::int64_t packed_part_offset(std::int64_t q, std::int64_t k, std::int64_t first) const {
    return (q * panel_columns() + first) * k;
  }
  // The plan kernel that computes `width` columns of a part of `stride` columns (a whole panel
  // or a group's last one: panel_columns()).
  int kernel(bool row_tail, std::int64_t width, std::int64_t stride, bool beta) const;
  // The (group, panel) of the i-th of the `groups * panels` pairs a recurrence's step gives the
  // thread whose panels start at `first_panel`: group by group, or last to first `backwards`
  // (every other step, so that the panels the step before read last are still in L2).
  static std::pair<std::int64_t, std::int64_t> step_pair(std::int64_t i, std::int64_t groups, std::int64_t panels,
                                                         std::int64_t first_panel, bool backwards) {
    const std::int64_t j = backwards ? groups * panels - 1 - i : i;
    return {j / panels, first_panel + j % panels};
  }
};

// Cost-model choice for C[M, columns] = A[M, K] B[K, columns] split into `groups` of `group`,
// blocked for `caches`. `shared`: the threads claim tiles as they go (a one-shot GEMM), rather
// than each computing its panels of every group (a recurrence's step). `b_share_bytes`: a
// step's bytes of B per thread, which stream from L3 at every step where L2 cannot hold them.
// `a_row_bytes`: how far apart A's rows lie where the tiles read them in place (0: packed).
// `isa`: the microkernel's (avx512 or avx2), whose registers bound the tiles.
GemmBlocking choose_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads, bool packed_b,
                             const CacheSizes& caches = {}, bool shared = false, std::int64_t b_share_bytes = 0,
                             std::int64_t a_row_bytes = 0, Isa isa = Isa::avx512);

// The most rows of A, `a_row_bytes` apart, that a tile reads without overfilling a set of L1
// (any number where A is packed: a_row_bytes 0); see gemm_blocking.cpp.
std::int64_t max_rows_in_l1_sets(std::int64_t a_row_bytes);

// AMX-BF16: K rounded up to the 32 k of a tile (A's rows and B's panels are zero padded).
inline std::int64_t bf16_k(std::int64_t k) { return (k + 31) / 32 * 32; }

// Where B's (k, column c of a panel) lies in a bf16 panel, in bf16 elements from its start: k
// tiles of 32 in order, each n_r tiles of 16 columns of 1 KiB, each [16 k pairs][16 columns][2]
// (AMX's pairs of k side by side, so a tile's row is 16 columns of two k).
inline std::int64_t bf16_packed_offset(std::int64_t n_r, std::int64_t k, std::int64_t c) {
  return (((k / 32) * n_r + c / 16) * 16 + (k % 32) / 2) * 32 + (c % 16) * 2 + k % 2;
}

// Floats of the A panels (blocking.pack_a): k_c rows of every row block of one k block (or
// with whole_k, of every k block: block kb at a_panel_offset(kb)), or with bf16, a_copies
// copies of M rows of bf16_k(K) bf16 values.
inline std::int64_t a_panel_elements(const GemmBlocking& b, std::int64_t m, std::int64_t k, bool whole_k = false) {
  if (b.int8) return b.a_copies * int8_a_bytes(m, k) / 4;
  if (b.bf16) return b.a_copies * m * bf16_k(k) / 2;
  return (whole_k ? k : std::min(b.k_c, k)) * b.row_blocks(m) * b.m_r;
}
// Where k block kb's panels [row block][k][m_r] start in A panels that hold all of K.
inline std::int64_t a_panel_offset(const GemmBlocking& b, std::int64_t m, std::int64_t kb) {
  return kb * b.k_c * b.row_blocks(m) * b.m_r;
}

// Tiling of an AMX-BF16 GEMM of M rows over column groups of `group` (see GemmBlocking::bf16).
// `shared`: a one-shot GEMM whose threads claim tiles (one A copy), else each thread's panels
// at every step of a recurrence (a copy of A per thread).
GemmBlocking choose_bf16_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads,
                                  const CacheSizes& caches, bool shared, Bf16Unit unit = Bf16Unit::amx);

// Tiling of an int8 GEMM of M rows over column groups of `group` (GemmBlocking::int8): the
// AVX512_BF16 tiles (the same register budget: m_r x n_r sums, n_r B vectors, two broadcasts),
// k_c all of int8_k(K), m blocks of A's uint8 rows in 3/8 of L2.
GemmBlocking choose_int8_blocking(std::int64_t m, std::int64_t k, std::int64_t group, int threads,
                                  const CacheSizes& caches, bool shared, Int8Unit unit = Int8Unit::avx512_vnni);

// Floats of a packed B for `groups` groups of `group` columns and K rows (bf16: half as many
// floats as bf16 values).
std::int64_t packed_elements(const GemmBlocking& b, std::int64_t groups, std::int64_t k);

}  // namespace rnnjit
