// rnnjit: what the C API's files share (runtime/c_api.cpp, runtime/onnx_adapter.cpp): the
// handles behind rnnjit.h's opaque types, and the argument checks that throw the status a C
// caller gets (c_api.cpp's guarded() turns them into it). Internal: no interface includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "rnnjit.h"
#include "rnnjit/rnn.hpp"

struct rnnjit_rnn {
  rnnjit::Rnn rnn;
};

struct rnnjit_execution {
  rnnjit::Execution ex;
  // Scratch of the ONNX layout conversions, grown once and reused (one thread at a time).
  std::vector<float> x, hx, cx, y, hy, cy;
  std::vector<std::int32_t> lengths;  // sequence_lens with its zeros made 1 (their rows are zeroed after)
};

namespace rnnjit::c_api {

class CApiError : public std::exception {
 public:
  CApiError(rnnjit_status_t status, std::string message) : status_(status), message_(std::move(message)) {}
  rnnjit_status_t status() const { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  rnnjit_status_t status_;
  std::string message_;
};

[[noreturn]] inline void invalid(std::string message) {
  throw CApiError(RNNJIT_STATUS_INVALID_ARGUMENT, std::move(message));
}
[[noreturn]] inline void unsupported(std::string message) {
  throw CApiError(RNNJIT_STATUS_UNSUPPORTED, std::move(message));
}

template <typename T>
T& deref(T* p, const char* name) {
  if (!p) invalid(fmt::format("{} is NULL", name));
  return *p;
}

// A caller's (pointer, size) pair: NULL with size 0 (or any pointer with size 0) is "not given".
template <typename T>
std::span<T> buffer(T* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
    invalid(fmt::format("{} is not aligned to {} bytes", name, alignof(T)));
  return {p, size};
}

inline std::span<std::byte> bytes(void* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  return {static_cast<std::byte*>(p), size};
}

inline std::span<const std::byte> bytes(const void* p, std::size_t size, const char* name) {
  if (size == 0) return {};
  if (!p) invalid(fmt::format("{} is NULL but its size is {}", name, size));
  return {static_cast<const std::byte*>(p), size};
}

inline void check_size(std::size_t size, std::int64_t expected, const char* name, const std::string& what) {
  if (static_cast<std::int64_t>(size) != expected)
    invalid(fmt::format("{} has {} elements, expected {} {}", name, size, expected, what));
}

}  // namespace rnnjit::c_api
