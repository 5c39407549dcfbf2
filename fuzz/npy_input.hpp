// The checks of fuzz_npy, shared by fuzz/fuzz_npy.cpp (libFuzzer) and
// tests/test_fuzz_regressions.cpp (which replays fuzz/corpus/fuzz_npy/ in the normal build).
//
// The contract (rnnjit/npy.hpp): any bytes either give an Array or throw
// rnnjit::Error("<name>: <problem>") on one line; never a crash, an out-of-bounds read or an
// allocation the input's size does not justify. An accepted array holds exactly
// elements() * item_size bytes, its typed copy and shape check agree with it, and it survives a
// serialize/parse round trip unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/npy.hpp"

namespace rnnjit::fuzz {

// Returns an empty string if every check holds, else what failed.
inline std::string check_npy_input(std::span<const std::byte> bytes) {
  const std::string name = "fuzz.npy";
  npy::Array a;
  try {
    a = npy::parse(bytes, name);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(name + ": ", 0) != 0) return "message does not start with the file name: " + msg;
    if (msg.find('\n') != std::string::npos || msg.find('\r') != std::string::npos)
      return "message is not one line: " + msg;
    return {};
  }
  if (a.shape.size() > npy::kMaxDims) return "more dimensions than kMaxDims accepted";
  for (std::int64_t d : a.shape)
    if (d < 0) return "negative dimension accepted";
  const std::int64_t elements = a.elements();
  if (static_cast<std::uint64_t>(elements) * npy::item_size(a.dtype) != a.data.size())
    return "data size differs from elements() * item_size";
  (void)npy::shape_string(a.shape);
  try {
    npy::expect_shape(a, a.shape, name);
    std::size_t copied = 0;
    switch (a.dtype) {
      case npy::DType::f32: copied = npy::as_f32(a, name).size(); break;
      case npy::DType::i32: copied = npy::as_i32(a, name).size(); break;
      case npy::DType::i64: copied = npy::as_i64(a, name).size(); break;
    }
    if (copied != static_cast<std::size_t>(elements)) return "the typed copy has the wrong number of elements";
  } catch (const Error& e) {
    return std::string("an accepted array was rejected by its own dtype or shape: ") + e.what();
  }
  npy::Array b;
  try {
    b = npy::parse(npy::serialize(a.dtype, a.shape, a.data), name);
  } catch (const Error& e) {
    return std::string("serialize() output does not parse: ") + e.what();
  }
  if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data) return "the round trip changed the array";
  return {};
}

}  // namespace rnnjit::fuzz
