// rnnjit tests: ONNX's activation functions (rnnjit/config.hpp's Activation), each with alpha
// and beta that are none of ONNX Runtime's defaults (and a leaky slope below 0 beside one in
// (0, 1)), for the tests that sweep them through kernels and plans.
#pragma once

#include <vector>

#include "rnnjit/config.hpp"

namespace rnnjit::test {

inline std::vector<ActivationFunction> onnx_functions() {
  return {{Activation::relu},
          {Activation::tanh},
          {Activation::sigmoid},
          {Activation::affine, 0.7f, -0.2f},
          {Activation::leaky_relu, 0.15f},
          {Activation::leaky_relu, -1.7f},
          {Activation::thresholded_relu, 0.3f},
          {Activation::scaled_tanh, 1.3f, 0.6f},
          {Activation::hard_sigmoid, 0.3f, 0.45f},
          {Activation::elu, 0.8f},
          {Activation::softsign},
          {Activation::softplus}};
}

}  // namespace rnnjit::test
