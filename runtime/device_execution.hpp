// rnnjit: an Execution on a device other than the CPU (Options::device), the interface that
// Execution's calls are forwarded to. The spans it takes hold DEVICE addresses (see
// rnnjit/rnn.hpp). Implemented by the CUDA executor (runtime/cuda/cuda_execution.cpp); builds
// without the CUDA toolkit get a factory that throws (runtime/cuda/cuda_none.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rnnjit/rnn.hpp"

namespace rnnjit {

class DeviceExecution {
 public:
  virtual ~DeviceExecution() = default;

  virtual const RnnConfig& config() const = 0;
  virtual Shape shape() const = 0;
  virtual Mode mode() const = 0;
  virtual const Plan& plan() const = 0;
  virtual std::size_t workspace_size() const = 0;
  virtual std::size_t reserve_size() const = 0;
  virtual std::uint64_t allocations() const = 0;
  virtual std::size_t packed_weights_size() const = 0;
  virtual void pack_weights(std::span<const float> weights, std::span<std::byte> packed) const = 0;

  virtual void forward(std::span<const float> weights, const ForwardIo& io, std::span<std::byte> reserve,
                       std::span<std::byte> workspace) = 0;
  virtual void backward_data(std::span<const float> weights, const BackwardDataIo& io, std::span<std::byte> reserve,
                             std::span<std::byte> workspace) = 0;
  virtual void backward_weights(const BackwardWeightsIo& io, std::span<const std::byte> reserve,
                                std::span<std::byte> workspace) = 0;
};

// Plans, compiles and loads the kernels, and creates the streams for one shape and mode on the
// CUDA device. Throws Error("no CUDA device: <reason>") without one.
std::unique_ptr<DeviceExecution> make_cuda_execution(const RnnConfig& config, const Shape& shape, Mode mode);

}  // namespace rnnjit
