#include "python/src/arrays.hpp"

#include <fmt/format.h>

#include <string>

namespace nb = nanobind;

namespace rnnjit::python {
namespace {

// "float32", "float64", "int32", "bool8"; other kinds (bfloat16, complex, ...) by their DLPack code.
std::string dtype_name(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  switch (static_cast<Code>(t.code)) {
    case Code::Int: return fmt::format("int{}", t.bits);
    case Code::UInt: return fmt::format("uint{}", t.bits);
    case Code::Float: return fmt::format("float{}", t.bits);
    case Code::Bool: return "bool";
    default: return fmt::format("a {}-bit dtype of DLPack code {}", t.bits, t.code);
  }
}

const char* device_name(int type) {
  if (type == nb::device::cpu::value) return "cpu";
  if (type == nb::device::cuda::value) return "cuda";
  if (type == nb::device::cuda_host::value) return "cuda pinned host";
  if (type == nb::device::cuda_managed::value) return "cuda managed";
  return "an unsupported device";
}

template <typename Array>
void check_device(const Array& a, const char* name, Device device) {
  const int want = device == Device::cuda ? nb::device::cuda::value : nb::device::cpu::value;
  if (a.device_type() != want)
    throw nb::value_error(fmt::format("{}: the array is on {}, but this Execution runs on {}", name,
                                      device_name(a.device_type()), to_string(device))
                              .c_str());
}

// Row-major with no gaps; dimensions of extent 1 may carry any stride (torch gives them several).
template <typename Array>
void check_contiguous(const Array& a, const char* name) {
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    const auto extent = static_cast<std::int64_t>(a.shape(i));
    if (extent != 1 && a.stride(i) != expected)
      throw nb::value_error(fmt::format("{}: the array is not C-contiguous (dimension {} has stride {}, expected {}); "
                                        "pass a contiguous copy (numpy.ascontiguousarray, Tensor.contiguous())",
                                        name, i, a.stride(i), expected)
                                .c_str());
    expected *= extent;
  }
}

template <typename T, typename Array>
T* checked_data(const Array& a, const char* name, Device device, nb::dlpack::dtype want, const char* want_name) {
  const nb::dlpack::dtype got = a.dtype();
  if (got != want)
    throw nb::type_error(fmt::format("{}: expected a {} array, got {}", name, want_name, dtype_name(got)).c_str());
  check_device(a, name, device);
  check_contiguous(a, name);
  return static_cast<T*>(const_cast<void*>(static_cast<const void*>(a.data())));
}

template <typename Array>
std::byte* checked_bytes(const Array& a, const char* name, Device device) {
  const nb::dlpack::dtype got = a.dtype();
  if (got != nb::dtype<std::uint8_t>() && got != nb::dtype<std::int8_t>())
    throw nb::type_error(fmt::format("{}: expected a uint8 array of bytes, got {}", name, dtype_name(got)).c_str());
  check_device(a, name, device);
  check_contiguous(a, name);
  return static_cast<std::byte*>(const_cast<void*>(static_cast<const void*>(a.data())));
}

}  // namespace

std::span<const float> floats_in(const InArray& a, const char* name, Device device) {
  return {checked_data<const float>(a, name, device, nb::dtype<float>(), "float32"), a.size()};
}

std::span<float> floats_out(const OutArray& a, const char* name, Device device) {
  return {checked_data<float>(a, name, device, nb::dtype<float>(), "float32"), a.size()};
}

std::span<const float> floats_in(const std::optional<InArray>& a, const char* name, Device device) {
  return a ? floats_in(*a, name, device) : std::span<const float>{};
}

std::span<float> floats_out(const std::optional<OutArray>& a, const char* name, Device device) {
  return a ? floats_out(*a, name, device) : std::span<float>{};
}

std::span<const std::int32_t> lengths_in(const std::optional<InArray>& a, const char* name) {
  if (!a) return {};
  return {checked_data<const std::int32_t>(*a, name, Device::cpu, nb::dtype<std::int32_t>(), "int32"), a->size()};
}

std::span<std::byte> bytes_out(const std::optional<OutArray>& a, const char* name, Device device) {
  return a ? std::span<std::byte>{checked_bytes(*a, name, device), a->size()} : std::span<std::byte>{};
}

std::span<const std::byte> bytes_in(const std::optional<InArray>& a, const char* name, Device device) {
  return a ? std::span<const std::byte>{checked_bytes(*a, name, device), a->size()} : std::span<const std::byte>{};
}

}  // namespace rnnjit::python
