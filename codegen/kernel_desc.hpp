// rnnjit: KernelDesc, the complete description of one generated gate kernel.
//
// Plain fixed-width fields, zero-initialised, no padding: it is compared and hashed as a whole
// (its bytes are the cache key) and it names the ISA and the generator version, so a change to
// an emitter can never reuse a stale kernel. Emitters follow it; they decide nothing.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

// Bumped whenever any emitter's output changes for an unchanged descriptor.
inline constexpr std::uint32_t kGeneratorVersion = 8;

enum class Pass : std::uint8_t { forward = 0, backward = 1 };
enum class KernelKind : std::uint8_t { gate = 0, gemm = 1, amx_gemm = 2, dpbf16_gemm = 3, vnni_gemm = 4,
                                       amx_int8_gemm = 5 };

// One descriptor type for every generated kernel; fields a kind does not use stay zero.
//   gate: the fused elementwise cell kernel of one time step over `rows` x `cols` hidden units.
//   gemm: C[rows, vectors*16] (+)= A[rows, k] B[k, vectors*16], k a run-time argument; the last
//         vector keeps n_tail lanes (0: all 16). Strides in elements. isa avx512 or avx2 (a
//         vector of 16 columns is two ymm there).
//   amx_gemm: C[rows, 16*vectors] (+)= A[rows, 32*k] B on AMX-BF16 tiles, k (tiles of 32) a
//         run-time argument: A bf16 rows a_row_stride apart, B a packed bf16 panel
//         (bf16_packed_offset in codegen/gemm_blocking.hpp) of b_k_stride column tiles, C FP32;
//         rows <= 32, vectors <= b_k_stride <= 2, the last 16 columns cut to n_tail (0: all 16).
//   dpbf16_gemm: the same product on the same operands with AVX512_BF16's vdpbf16ps on zmm
//         registers (rows x vectors sums, vectors <= b_k_stride <= 8), for CPUs without AMX.
//   vnni_gemm: C[rows, 16*vectors] (+)= A[rows, 64*k] B dequantized, on uint8 A rows
//         (a_row_stride bytes apart) and one packed int8 panel of b_k_stride column tiles
//         (codegen/int8_layout.hpp), C FP32; k (tiles of 64) a run-time argument. The dot step is
//         int8_unit's: vpdpbusd on zmm (avx512_vnni, isa avx512) or ymm (avx_vnni, isa avx2), or
//         vpmaddubsw + vpmaddwd on ymm (avx2).
//   amx_int8_gemm: the same product on the same operands on AMX-INT8 tiles (TDPBUSD): rows <= 32,
//         vectors <= b_k_stride <= 2, as amx_gemm.
struct KernelDesc {
  std::uint32_t generator_version = kGeneratorVersion;
  std::uint8_t kind = 0;      // KernelKind
  std::uint8_t isa = 0;       // Isa: the code the kernel is made of (reference = scalar C++)
  std::uint8_t cell = 0;      // gate: CellKind
  std::uint8_t pass = 0;      // gate: Pass
  std::uint8_t training = 0;  // gate forward: also store what backward needs into the reserve
  std::uint8_t beta = 0;      // gemm: 1 adds to C, 0 overwrites it
  std::uint8_t n_tail = 0;    // gemm: valid lanes of the last vector, 0 when it is full
  std::uint8_t vectors = 0;   // gemm: 16-column vectors of C per row (n_r)
  std::uint8_t a_lookahead = 0;  // amx_gemm: A's rows prefetched this many k tiles on into L1 (0: none)
  // gate, gru_reset_before: which of the step's two kernels (the recurrent GEMM of n reads
  // r * h_prev, so the step splits at a barrier). Forward 0: r,z -> r * h_prev (h_out) and z
  // (c_out); 1: n and h from gh_n, z (c_prev) and h_prev. Backward 0: dz, dn and the direct
  // dh z; 1 (after the GEMM d(r * h_prev) = dn W_hn): dr, and dh_carry += d(r * h_prev) r.
  std::uint8_t part = 0;
  std::uint8_t peephole = 0;      // gate, LSTM: i, f see P_i, P_f times c_prev and o sees P_o times c
  std::uint8_t input_forget = 0;  // gate, LSTM: f = 1 - i
  // gemm, beta 0 and no n_tail: C's tiles are written with non-temporal stores, which need C's
  // rows 64-byte aligned (c and c_row_stride) and an sfence before another thread reads C.
  std::uint8_t stream_c = 0;
  // gemm: each unrolled k iteration also prefetches this many cache lines into L2 from
  // GemmArgs::next_b on (0: none); see GemmBlocking::next_panel_lines.
  std::uint8_t next_b_lines = 0;
  // gate: ONNX's activations (an Activation per ActivationRole f, g, h) where the kernel's
  // direction uses others than the cell's own (RnnConfig::custom_activations); all standard (0)
  // otherwise, so a plain cell's descriptor and kernel are unchanged. Their parameters are in
  // activation_alpha_bits and activation_beta_bits.
  std::uint8_t activation[kActivationRoles] = {};
  // vnni_gemm: the Int8Unit whose dot step the kernel takes (avx512_vnni, 0, on isa avx512;
  // avx_vnni or avx2 on isa avx2; codegen/int8_unit.hpp).
  std::uint8_t int8_unit = 0;
  std::uint8_t unused_[2] = {};  // the descriptor is hashed and compared as bytes: no padding
  std::uint32_t hidden = 0;   // gate: H, the unit of every row stride
  std::uint32_t rows = 0;     // gate: batch rows N; gemm: rows of C (m_r)
  std::uint32_t ld_h = 0;     // gate: row stride of h_prev, h_out, h and (unless dy_row_stride) dy (D*H)
  std::uint32_t unroll = 0;   // gate: vectors per gate per iteration; gemm: k-loop unroll
  std::uint32_t cols = 0;     // gate: hidden units this launch covers (<= hidden)
  std::uint32_t a_row_stride = 0, a_k_stride = 0, b_k_stride = 0, c_row_stride = 0;  // gemm
  std::uint32_t clip_bits = 0;  // gate, LSTM: the cell clip as float bits (std::bit_cast), 0: none
  std::uint32_t gate_clip_bits = 0;  // gate: the pre-activation clip (ONNX's clip) as float bits, 0: none
  std::uint32_t b_lookahead = 0;     // gemm: each k step prefetches B's row this many k steps on into L1 (0: none); amx_gemm, dpbf16_gemm: its tiles
  std::uint32_t relu_alpha_bits = 0;  // gate, rnn_relu: the leaky slope below zero as float bits, 0: plain ReLU
  // gate forward: the row stride of gx in floats where it is not G*H (0): the planner pads gx's
  // rows to whole vectors (gx_row_floats in codegen/planner.hpp).
  std::uint32_t gx_row_stride = 0;
  // gate backward: the row stride of dy in floats where it is not ld_h (0): summed directions
  // read the one gradient of their sum, [N, S], in place (S, where ld_h is 2*S).
  std::uint32_t dy_row_stride = 0;
  // gate: alpha and beta of each role's activation as float bits (0 where it takes none).
  std::uint32_t activation_alpha_bits[kActivationRoles] = {};
  std::uint32_t activation_beta_bits[kActivationRoles] = {};

  float clip() const { return std::bit_cast<float>(clip_bits); }
  float gate_clip() const { return std::bit_cast<float>(gate_clip_bits); }
  float relu_alpha() const { return std::bit_cast<float>(relu_alpha_bits); }
  // Whether the kernel computes other activations than its cell's own (the fields above).
  bool custom_activations() const { return activation[0] || activation[1] || activation[2]; }
  // The function of a role as the fields hold it (standard: the cell's own).
  ActivationFunction activation_of(ActivationRole role) const {
    const auto r = static_cast<std::size_t>(role);
    return {static_cast<Activation>(activation[r]), std::bit_cast<float>(activation_alpha_bits[r]),
            std::bit_cast<float>(activation_beta_bits[r])};
  }
  // Stores direction d's functions of the config (resolved) when they are not the cell's own.
  void set_activations(const RnnConfig& config, int direction) {
    if (!config.custom_activations(direction)) return;
    for (int r = 0; r < activation_role_count(config.cell); ++r) {
      const ActivationFunction f = config.activation(direction, static_cast<ActivationRole>(r));
      activation[r] = static_cast<std::uint8_t>(f.kind);
      activation_alpha_bits[r] = std::bit_cast<std::uint32_t>(f.alpha);
      activation_beta_bits[r] = std::bit_cast<std::uint32_t>(f.beta);
    }
  }

  KernelKind kind_of() const { return static_cast<KernelKind>(kind); }
  Isa isa_kind() const { return static_cast<Isa>(isa); }
  CellKind cell_kind() const { return static_cast<CellKind>(cell); }
  Pass pass_kind() const { return static_cast<Pass>(pass); }
  int gates() const { return gate_count(cell_kind()); }
  std::int64_t gx_stride() const { return gx_row_stride ? gx_row_stride : std::int64_t{gates()} * hidden; }
  std::int64_t dy_stride() const { return dy_row_stride ? dy_row_stride : ld_h; }
  // Width (in units of H) of a row of the reserve's gate region: LSTM i,f,g,o; GRU r,z,hn,n;
  // the vanilla RNNs a single slot that only backward writes (the gate gradient).
  int reserve_gates() const { return cell_kind() == CellKind::gru ? 4 : gates(); }

  bool operator==(const KernelDesc& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};
static_assert(std::has_unique_object_representations_v<KernelDesc>, "KernelDesc must have no padding");

struct KernelDescHash {
  std::size_t operator()(const KernelDesc& d) const;  // FNV-1a over the bytes
};

// Derived from the descriptor and used everywhere: dumps, logs, test names, symbols.
// e.g. "lstm_fwd_train_avx512_h800_c800_n20_ld800_u4", "lstm_fwd_avx2_h800_c800_n20_ld800_u2",
// "sgemm_avx512_m5_v5_t0_b0_ar800_ak1_bk80_cr3200_u4", "sgemm_avx2_m6_v1_t0_b0_ar800_ak1_bk16_cr3200_u4".
std::string kernel_name(const KernelDesc& d);
// "cell=lstm pass=fwd training=1 isa=avx512 H=800 N=20 ld_h=800 unroll=4 gen=1"
std::string describe(const KernelDesc& d);

}  // namespace rnnjit
