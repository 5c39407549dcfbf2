// rnnjit: what every Execution checks of a call, shared by the CPU execution (runtime/rnn.cpp)
// and the device ones (runtime/cuda/cuda_execution.cpp) so that both refuse the same calls in
// the same words: the buffers' sizes (optional ones may be empty), the sequence lengths, the
// caller's scratch buffers, and the reserve's life cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "rnnjit/rnn.hpp"

namespace rnnjit {

class CallChecks {
 public:
  CallChecks(const RnnConfig& config, const Shape& shape, Mode mode);

  const std::string& shape_text() const { return shape_text_; }  // "for lstm I=8 H=16 L=1 D=1 T=5 N=3"
  std::int64_t weight_elements() const { return weights_; }

  void weights(std::span<const float> w) const;
  void forward(const ForwardIo& io) const;              // x, y, hx, hy, cx, cy and seq_lengths
  void backward_data(const BackwardDataIo& io) const;   // dy, dx, dhy, dhx, dcy, dcx
  void backward_weights(const BackwardWeightsIo& io) const;  // x, dweights
  // Throws unless the Execution was prepared for training.
  void require_training(const char* call) const;
  // A caller's workspace or reserve: empty (the Execution's own), or at least `needed` bytes
  // aligned for floats.
  static void scratch(std::span<const std::byte> s, std::size_t needed, const char* name);

 private:
  void cell_state(std::size_t size, const char* name) const;

  RnnConfig config_;
  Shape shape_;
  Mode mode_;
  std::int64_t weights_;
  std::string shape_text_;
};

// The reserve's life cycle: forward training fills it, backward_data consumes its gates,
// backward_weights reads what backward_data left there. A call out of turn, or with another
// reserve than the one the last call filled, is an Error naming the call that must come first.
class ReserveCycle {
 public:
  enum class State { empty, forwarded, backpropagated };

  // `reserve`: the buffer this call uses (null where the reserve is internal: not compared).
  void require_forwarded(const std::byte* reserve) const;       // before backward_data
  void require_backpropagated(const std::byte* reserve) const;  // before backward_weights
  void set(State state, const std::byte* reserve = nullptr) {
    state_ = state;
    if (reserve) owner_ = reserve;
  }

 private:
  State state_ = State::empty;
  const std::byte* owner_ = nullptr;
};

}  // namespace rnnjit
