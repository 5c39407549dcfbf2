// rnnjit: a call's tensors bound to the plan's buffers, for every executor's bindings (the CPU's
// Bindings, the device's cuda::DeviceBindings: anything with bind(Buffer, const float*)), so that
// both executions bind the same tensors to the same Buffer names. Optional tensors left empty
// are bound as null.
#pragma once

#include <span>

#include "codegen/plan.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

inline const float* data_or_null(std::span<const float> s) { return s.empty() ? nullptr : s.data(); }
inline float* data_or_null(std::span<float> s) { return s.empty() ? nullptr : s.data(); }

// The weights and forward's x, y, hx, cx, hy, cy and dropout seed (not the lengths: each
// executor keeps them its own way).
template <typename Bindings>
void bind_forward(Bindings& b, std::span<const float> weights, const ForwardIo& io) {
  b.bind(Buffer::weights, weights.data());
  b.bind(Buffer::x, io.x.data());
  b.bind(Buffer::y, io.y.data());
  b.bind(Buffer::hx, data_or_null(io.hx));
  b.bind(Buffer::cx, data_or_null(io.cx));
  b.bind(Buffer::hy, data_or_null(io.hy));
  b.bind(Buffer::cy, data_or_null(io.cy));
  b.dropout_seed = io.dropout_seed;
}

// The weights and backward_data's dy, dx, dhy, dcy, dhx, dcx.
template <typename Bindings>
void bind_backward_data(Bindings& b, std::span<const float> weights, const BackwardDataIo& io) {
  b.bind(Buffer::weights, weights.data());
  b.bind(Buffer::dy, io.dy.data());
  b.bind(Buffer::dx, io.dx.data());
  b.bind(Buffer::dhy, data_or_null(io.dhy));
  b.bind(Buffer::dcy, data_or_null(io.dcy));
  b.bind(Buffer::dhx, data_or_null(io.dhx));
  b.bind(Buffer::dcx, data_or_null(io.dcx));
}

// backward_weights' x and dweights.
template <typename Bindings>
void bind_backward_weights(Bindings& b, const BackwardWeightsIo& io) {
  b.bind(Buffer::x, io.x.data());
  b.bind(Buffer::dweights, io.dweights.data());
}

}  // namespace rnnjit
