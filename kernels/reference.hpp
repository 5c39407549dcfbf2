// rnnjit: the scalar reference. Plain, readable loops for every cell, layer count and direction:
// the oracle that every generated kernel and every executor is checked against.
// Templated on the scalar so that gradient checks can run in double precision.
#pragma once

#include <cstdint>
#include <vector>

#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::reference {

// Per-call options that are not part of the network description.
struct CallOptions {
  // [N] sequence lengths, each in [1, T], in any order (PyTorch's pack_padded_sequence with
  // enforce_sorted=False, cuDNN's padded layout). Element n is processed at t < L_n only: the
  // forward direction walks t = 0..L_n-1, the reverse one t = L_n-1..0, both from h0; y at
  // t >= L_n is 0 and hy/cy are the state after the element's own last processed step.
  // null: every element has length T.
  const std::int32_t* seq_lengths = nullptr;
  // Seed of the dropout masks between layers (rnnjit/dropout.hpp); training with dropout only.
  std::uint64_t dropout_seed = 0;
  // int8_dynamic (inference only): every product with a weight matrix quantizes as the int8
  // GEMMs do (kernels/int8_reference.hpp): W per row once, each x_t, h_{t-1} (and the LSTM
  // projection's and the reset-before GRU's inputs) per row of the batch at every step.
  Quantize quantize = Quantize::none;
  // int8_dynamic: the unit whose activation quantization (levels, codegen/int8_unit.hpp) the
  // products follow.
  Int8Unit int8_unit = Int8Unit::avx512_vnni;
};

// What forward training keeps for backward (plain vectors: the reference is the oracle, not a
// model of the JIT's reserve layout). Every array is sequence-major whatever config.batch_first
// says. Every per-direction array is indexed by ld = layer*D + dir and, inside, by time index t
// in sequence order (not processing order), so the reverse direction's entry for t is its state
// after it has consumed x_t. Rows (t, n) with t >= lengths[n] are never processed and hold 0.
// Widths: S = config.state_size() (h), H (c, gates), P = config.proj_size.
template <typename T>
struct Reserve {
  RnnConfig config;                     // of the forward call that filled it (checked by backward)
  std::int64_t seq_len = 0, batch = 0;  // ditto
  std::vector<std::int64_t> lengths;    // [N] the sequence length of each element (T when not given)
  // inputs[l]: layer l's input [T, N, I_l] as the layer read it: x for l = 0, the previous
  // layer's output after dropout above.
  std::vector<std::vector<T>> inputs;
  // dropout[l] (l >= 1, training with dropout > 0 only, else empty): the factor applied to
  // layer l-1's output [T, N, Y] to make inputs[l]: 0 (dropped) or T(dropout_scale(p)).
  std::vector<std::vector<T>> dropout;
  std::vector<std::vector<T>> h;       // [ld] h_t          [T, N, S]
  std::vector<std::vector<T>> c;       // [ld] LSTM c_t     [T, N, H] (after clipping; empty for other cells)
  std::vector<std::vector<T>> r;       // [ld] LSTM with projection: r_t = o*tanh(c_t) [T, N, H], h_t = W_hr r_t
  std::vector<std::vector<T>> gates;   // [ld] activated gates [T, N, G*H]: RNN h; LSTM i,f,g,o; GRU r,z,n
  std::vector<std::vector<T>> gru_hn;  // [ld] GRU only: W_hn h_prev + b_hn (reset before: W_hn (r h_prev) + b_hn) [T, N, H]
  std::vector<std::vector<T>> h0, c0;  // [ld] initial states h0 [N, S], c0 [N, H] (zeros when not given; c0 LSTM only)
  // Filled by backward_data, read by backward_weights: pre-activation gate gradients on the
  // input side (dgx) and the recurrent side (dgh) [T, N, G*H]. They are equal except for GRU's
  // n gate of the linear-before-reset GRU, where dgh = dgx * r (the reset gate multiplies
  // W_hn h_prev + b_hn). With the reset before, dW_hn pairs dgh with r * h_prev instead of h_prev.
  std::vector<std::vector<T>> dgx, dgh;
  // LSTM with projection: the total gradient reaching h_t [T, N, P] (for dW_hr = sum dh_t^T r_t).
  std::vector<std::vector<T>> dh;
};

// Forward pass. w is the canonical buffer (rnnjit/weights.hpp). x [T, N, I] (batch_first:
// [N, T, I]); h0 [L*D, N, S] and c0 [L*D, N, H] may be null (zeros); y [T, N, Y] (batch_first:
// [N, T, Y]; Y = config.output_size()), hy [L*D, N, S], cy [L*D, N, H] may be null (not
// written); cy and c0 are used for
// LSTM only. Validates config, shape and options.seq_lengths (throws Error).
// With reserve != nullptr this is forward training: it fills *reserve and applies dropout
// between layers (config.dropout, options.dropout_seed); inference never drops.
template <typename T>
void forward(const RnnConfig& config, const Shape& shape, const T* w, const T* x, const T* h0, const T* c0,
             T* y, T* hy, T* cy, Reserve<T>* reserve, const CallOptions& options = {});

// Backward data: given dy (the layout of y) and dhy [L*D,N,S] / dcy [L*D,N,H] (each null =
// zeros), writes dx (the layout of x), dh0 [L*D,N,S] and dc0 [L*D,N,H] (null = not written).
// Needs the reserve of a forward training call with the same weights (throws Error if the
// reserve is of another config or shape); uses its sequence lengths and dropout masks: dy at
// t >= L_n is ignored and dx there is 0. Stores the gate gradients in it for backward_weights.
template <typename T>
void backward_data(const RnnConfig& config, const Shape& shape, const T* w, Reserve<T>& reserve, const T* dy,
                   const T* dhy, const T* dcy, T* dx, T* dh0, T* dc0);

// Backward weights: writes (overwrites) dw, the gradient for every block of the canonical
// buffer, from the reserve after backward_data (sums over the valid steps only).
template <typename T>
void backward_weights(const RnnConfig& config, const Shape& shape, const Reserve<T>& reserve, T* dw);

// Scalar activations shared by the reference and the tests of generated code. Both are safe
// for any |x| (no overflow, no NaN from inf/inf) and return NaN for NaN.
template <typename T> T sigmoid(T x);
template <typename T> T tanh_(T x);

}  // namespace rnnjit::reference
