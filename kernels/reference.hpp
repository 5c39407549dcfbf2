// rnnjit: the scalar reference. Plain, readable loops for every cell, layer count and direction:
// the oracle that every generated kernel and every executor is checked against.
// Templated on the scalar so that gradient checks can run in double precision.
#pragma once

#include <cstdint>
#include <vector>

#include "rnnjit/config.hpp"

namespace rnnjit::reference {

// What forward training keeps for backward (plain vectors: the reference is the oracle, not a
// model of the JIT's reserve layout). Every per-direction array is indexed by ld = layer*D + dir
// and, inside, by time index t in sequence order (not processing order), so the reverse
// direction's entry for t is its state after it has consumed x_t.
template <typename T>
struct Reserve {
  RnnConfig config;                     // of the forward call that filled it (checked by backward)
  std::int64_t seq_len = 0, batch = 0;  // ditto
  // inputs[l]: layer l's input [T, N, I_l] (x for l = 0, the previous layer's y above).
  std::vector<std::vector<T>> inputs;
  std::vector<std::vector<T>> h;       // [ld] h_t          [T, N, H]
  std::vector<std::vector<T>> c;       // [ld] LSTM c_t     [T, N, H] (empty for other cells)
  std::vector<std::vector<T>> gates;   // [ld] activated gates [T, N, G*H]: RNN h; LSTM i,f,g,o; GRU r,z,n
  std::vector<std::vector<T>> gru_hn;  // [ld] GRU only: W_hn h_prev + b_hn [T, N, H]
  std::vector<std::vector<T>> h0, c0;  // [ld] initial states [N, H] (zeros when not given; c0 LSTM only)
  // Filled by backward_data, read by backward_weights: pre-activation gate gradients on the
  // input side (dgx) and the recurrent side (dgh) [T, N, G*H]. They are equal except for GRU's
  // n gate, where dgh = dgx * r (the reset gate multiplies W_hn h_prev + b_hn).
  std::vector<std::vector<T>> dgx, dgh;
};

// Forward pass. w is the canonical buffer (rnnjit/weights.hpp). h0/c0 may be null (zeros);
// y/hy/cy may be null (not written); cy and c0 are used for LSTM only. Validates config and
// shape (throws Error).
// With reserve != nullptr this is forward training and fills *reserve.
template <typename T>
void forward(const RnnConfig& config, const Shape& shape, const T* w, const T* x, const T* h0, const T* c0,
             T* y, T* hy, T* cy, Reserve<T>* reserve);

// Backward data: given dy [T,N,D*H] and dhy/dcy [L*D,N,H] (each null = zeros), writes dx [T,N,I],
// dh0 and dc0 [L*D,N,H] (null = not written). Needs the reserve of a forward training call
// with the same weights (throws Error if the reserve is of another config or shape); stores the
// gate gradients in it for backward_weights.
template <typename T>
void backward_data(const RnnConfig& config, const Shape& shape, const T* w, Reserve<T>& reserve, const T* dy,
                   const T* dhy, const T* dcy, T* dx, T* dh0, T* dc0);

// Backward weights: writes (overwrites) dw, the gradient for every block of the canonical
// buffer, from the reserve after backward_data.
template <typename T>
void backward_weights(const RnnConfig& config, const Shape& shape, const Reserve<T>& reserve, T* dw);

// Scalar activations shared by the reference and the tests of generated code. Both are safe
// for any |x| (no overflow, no NaN from inf/inf) and return NaN for NaN.
template <typename T> T sigmoid(T x);
template <typename T> T tanh_(T x);

}  // namespace rnnjit::reference
