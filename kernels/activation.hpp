// rnnjit: ONNX's activation functions (rnnjit/config.hpp's Activation) in scalar code, shared by
// the scalar references (kernels/reference.cpp, kernels/gate_reference.cpp). Each follows ONNX's
// formula; NaN stays NaN.
#pragma once

#include <algorithm>
#include <cmath>

#include "rnnjit/config.hpp"

namespace rnnjit {

// The logistic sigmoid without overflow: exp(-x) for x >= 0, exp(x) below (NaN takes the second
// branch, where it propagates).
template <typename T>
T logistic(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// f(x) for a resolved function (never Activation::standard).
template <typename T>
T activate(const ActivationFunction& f, T x) {
  const T alpha = static_cast<T>(f.alpha), beta = static_cast<T>(f.beta);
  switch (f.kind) {
    case Activation::relu: return x < T(0) ? T(0) : x;
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return logistic(x);
    case Activation::affine: return alpha * x + beta;
    case Activation::leaky_relu: return x >= T(0) ? x : alpha * x;
    case Activation::thresholded_relu: return x > alpha ? x : (x == x ? T(0) : x);
    case Activation::scaled_tanh: return alpha * std::tanh(beta * x);
    case Activation::hard_sigmoid: {
      const T v = alpha * x + beta;
      return v == v ? std::clamp(v, T(0), T(1)) : v;
    }
    case Activation::elu: return x >= T(0) ? x : alpha * std::expm1(x);
    case Activation::softsign: return x / (T(1) + std::abs(x));
    case Activation::softplus: return x > T(20) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    case Activation::standard: break;
  }
  return x;  // unreachable: callers resolve standard first (RnnConfig::activation)
}

}  // namespace rnnjit
