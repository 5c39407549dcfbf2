// rnnjit: the argument structs of the generated kernels. One struct per kernel kind and pass,
// passed as a single pointer; generated code loads the fields by offsetof. Gate kernels cover
// hidden units [0, cols) from the pointers given; row strides follow from the KernelDesc:
//   gx: gx_stride()   gh: G*H   h_prev, h_out, h: ld_h   dy: dy_stride()   c_*: H   gates: reserve_gates*H
//   dh_carry, dc_carry: H     peephole: rows of H (not per batch row, like the biases)
#pragma once

#include <cstdint>

namespace rnnjit {

struct GateForwardArgs {
  const float* gx;       // [N, G*H] input projection of this step (W_ih x_t), no bias; rows gx_stride() apart
  const float* gh;       // [N, G*H] recurrent projection (W_hh h_{t-1}), no bias
  const float* bias_ih;  // [G*H]
  const float* bias_hh;  // [G*H]
  const float* h_prev;   // [N, ld_h]
  const float* c_prev;   // [N, H] LSTM only
  float* h_out;          // [N, ld_h]
  float* c_out;          // [N, H] LSTM only; may equal c_prev (in-place update)
  float* gates;          // [N, reserve_gates*H] training only: LSTM i,f,g,o; GRU r,z,hn,n; GRU
                         //   reset before r,z (part 0), n (part 1)
  const float* peephole; // [3, H] LSTM with peepholes: P_i, P_f, P_o
};

struct GateBackwardArgs {
  const float* dy;        // [N, dy_stride()] gradient arriving at h_t from the layer above (or the loss)
  const float* h;         // [N, ld_h] h_t (vanilla RNN)
  const float* h_prev;    // [N, ld_h] h_{t-1} (GRU)
  const float* c;         // [N, H] c_t (LSTM)
  const float* c_prev;    // [N, H] c_{t-1} (LSTM)
  float* gates;           // in: the forward's gates; out (in place): pre-activation gradients.
                          //   LSTM di,df,dg,do; GRU dr,dz,dn*r (recurrent side),dn (input side); RNN da
  float* dh_carry;        // in: dL/dh_t through the recurrence; out: GRU's direct dh_{t-1} = dh*z
                          //   (the executor's GEMM then adds dgates x W_hh)
  float* dc_carry;        // in: dL/dc_t; out: dL/dc_{t-1} (LSTM)
  const float* peephole;  // [3, H] LSTM with peepholes: P_i, P_f, P_o
  const float* d_reset_h; // [N, H] GRU reset before, part 1: dL/d(r * h_prev) = dn W_hn
};

// The persistent recurrent kernel (codegen/cuda/persistent_source.hpp): a whole forward
// recurrence. Step s < steps runs time t = reverse ? steps - 1 - s : s; an operand `x` with a
// time stride x_t is at x + t * x_t then (rows as GateForwardArgs says); h_{t-1} at step 0 is
// h_init, c_{t-1} c_init. c_t == 0: c is one buffer updated in place (inference).
struct PersistentForwardArgs {
  const float* w_hh;     // [G*H, H] rows ld_w apart: gh = h_prev W_hh^T
  std::int64_t ld_w;
  const float* gx;       // at time t: gx + t * gx_t
  std::int64_t gx_t;
  const float* bias_ih;
  const float* bias_hh;
  const float* peephole;
  const float* h_init;   // [N, ld_h]
  const float* c_init;   // [N, H] LSTM only
  float* h;              // h_t: h + t * h_t; h_t != 0 (every step's h is kept)
  std::int64_t h_t;
  float* c;              // LSTM only
  std::int64_t c_t;
  float* gates;          // training only
  std::int64_t gates_t;
  std::uint32_t* arrived;  // the grid barrier's counter: zero at the launch
  std::int64_t steps;
  std::int64_t reverse;    // 0 or 1
};

// C[rows, vectors*16] (+)= A[rows, k] B[k, vectors*16]; strides come from the KernelDesc.
struct GemmArgs {
  const float* a;
  const float* b;
  float* c;
  std::int64_t k;        // >= 1 (amx_gemm: tiles of 32 k)
  // gemm with desc.next_b_lines: where this tile's share of the next B panel starts, prefetched
  // into L2 while the tile runs (any address: a prefetch never faults).
  const void* next_b;
  // amx_gemm: nonzero when this thread's tiles already hold this kernel's configuration (the
  // last AMX kernel it ran was this one, with no release since): ldtilecfg costs ~100 ns.
  std::int64_t configured;
};

// vnni_gemm and amx_int8_gemm (codegen/int8_layout.hpp): C[rows, vectors*16] (+)= dequantized A[rows, 64*k] B:
// A uint8 rows (zero point 128), B one packed int8 panel with its compensation and scales
// behind its data, C FP32 = float(sum - compensation) * scale_w[column] * a_scale[row].
struct Int8GemmArgs {
  const std::uint8_t* a;
  const std::int8_t* b;
  float* c;
  std::int64_t k;         // tiles of 64 k, >= 1: all of the panel's
  const float* a_scale;   // [rows] the scales of A's rows
  // amx_int8_gemm: nonzero when this thread's tiles already hold this kernel's configuration
  // (as GemmArgs::configured).
  std::int64_t configured;
};

}  // namespace rnnjit
