// Python arrays as the C++ API's spans. Anything that speaks DLPack or the buffer protocol
// (numpy arrays, torch tensors) crosses without a copy; each is checked for its dtype, its
// device and C-contiguity, and a mismatch raises TypeError or ValueError naming the argument.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "rnnjit/rnn.hpp"

namespace rnnjit::python {

using InArray = nanobind::ndarray<nanobind::ro>;  // read only: read-only numpy arrays pass
using OutArray = nanobind::ndarray<>;            // written: must be writable

// float32 arrays on `device`; an absent optional one is an empty span (the C++ API's "none").
std::span<const float> floats_in(const InArray& a, const char* name, Device device);
std::span<float> floats_out(const OutArray& a, const char* name, Device device);
std::span<const float> floats_in(const std::optional<InArray>& a, const char* name, Device device);
std::span<float> floats_out(const std::optional<OutArray>& a, const char* name, Device device);

// int32 sequence lengths, always in host memory (as cuDNN's seqLengthArray).
std::span<const std::int32_t> lengths_in(const std::optional<InArray>& a, const char* name);

// Raw bytes (uint8 or int8 arrays): reserve, workspace, packed weights.
std::span<std::byte> bytes_out(const std::optional<OutArray>& a, const char* name, Device device);
std::span<const std::byte> bytes_in(const std::optional<InArray>& a, const char* name, Device device);

}  // namespace rnnjit::python
