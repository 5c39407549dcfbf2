// rnnjit: ONNX's gate clip, shared by the scalar references. Forward clamps every gate's
// pre-activation to [-bound, bound] before its activation; backward lets a gradient through only
// where the pre-activation was strictly inside, which it reads off the stored activation: a
// clamped gate holds exactly the activation of a bound, and the activations are monotonic. The
// generated kernels do the same with the bounds' activations computed by their own activation
// code, so each backend agrees with its own forward bit for bit.
#pragma once

#include <algorithm>

namespace rnnjit {

template <typename T>
struct GateClip {
  T bound = T(0);  // 0: no clipping
  T sigmoid_lo = T(0), sigmoid_hi = T(0), tanh_lo = T(0), tanh_hi = T(0);  // activations of -bound, bound

  GateClip() = default;
  template <typename Sigmoid, typename Tanh>
  GateClip(T b, Sigmoid sigmoid, Tanh tanh)
      : bound(b), sigmoid_lo(sigmoid(-b)), sigmoid_hi(sigmoid(b)), tanh_lo(tanh(-b)), tanh_hi(tanh(b)) {}

  T operator()(T x) const { return bound > T(0) ? std::clamp(x, -bound, bound) : x; }  // NaN stays NaN
  // 1 where the gradient passes the clamp, else 0, from the gate's activation a.
  T sigmoid_pass(T a) const { return bound == T(0) || (sigmoid_lo < a && a < sigmoid_hi) ? T(1) : T(0); }
  T tanh_pass(T a) const { return bound == T(0) || (tanh_lo < a && a < tanh_hi) ? T(1) : T(0); }
  // ReLU with slope alpha below zero: relu(-bound) = alpha * (-bound), which a plain ReLU's zero
  // slope makes moot (alpha 0: only a < bound matters).
  T relu_pass(T a, T alpha = T(0)) const {
    return bound == T(0) || (a < bound && (alpha == T(0) || alpha * -bound < a)) ? T(1) : T(0);
  }
};

}  // namespace rnnjit
