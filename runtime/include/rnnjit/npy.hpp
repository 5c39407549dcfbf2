// rnnjit: a small reader and writer of NumPy's .npy files (float32, int32, int64).
//
// The reader takes format versions 1.0, 2.0 and 3.0, little-endian C-order arrays only, and
// checks every byte it reads: it never crashes on a malformed file. Each problem is reported as
// an rnnjit::Error with a single-line message "<file>: <problem>", e.g.
//   x.npy: shape (3, 4) does not match expected (3, 5)
//   w.npy: unsupported dtype '<f8' (expected '<f4', '<i4' or '<i8')
// The writer writes version 1.0 with the header padded so that the data starts on a 64-byte
// boundary, as numpy.save does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rnnjit/error.hpp"

namespace rnnjit::npy {

enum class DType : std::uint8_t { f32 = 0, i32 = 1, i64 = 2 };

std::string_view descr(DType dtype);      // "<f4", "<i4", "<i8"
std::string_view type_name(DType dtype);  // "float32", "int32", "int64"
std::size_t item_size(DType dtype);       // 4, 4, 8

// Largest header (the dict text after the preamble) the reader accepts, and most dimensions.
inline constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
inline constexpr std::size_t kMaxDims = 32;

struct Array {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // () for a scalar
  std::vector<std::byte> data;      // elements() * item_size(dtype) bytes, little-endian, C order

  std::int64_t elements() const;  // product of shape (1 for a scalar)
};

// "(3, 4)", "(3,)", "()": Python's tuple spelling, as numpy prints shapes.
std::string shape_string(std::span<const std::int64_t> shape);

// Reads a whole file. Throws Error("<path>: <problem>").
Array read(const std::string& path);

// Parses the bytes of a .npy file held in memory; `name` is used in messages. The entry point
// for fuzzing: accepts any bytes and either returns an Array or throws Error.
Array parse(std::span<const std::byte> bytes, const std::string& name);

// Throws Error("<name>: shape (3, 4) does not match expected (3, 5)") unless shapes are equal.
void expect_shape(const Array& array, const std::vector<std::int64_t>& expected, const std::string& name);
// Throws Error naming both dtypes unless array.dtype == dtype.
void expect_dtype(const Array& array, DType dtype, const std::string& name);

// Typed copies of an array's data; the dtype must match exactly (no conversions).
std::vector<float> as_f32(const Array& array, const std::string& name);
std::vector<std::int32_t> as_i32(const Array& array, const std::string& name);
std::vector<std::int64_t> as_i64(const Array& array, const std::string& name);

// read() + expect_dtype() + expect_shape() + typed copy.
std::vector<float> read_f32(const std::string& path, const std::vector<std::int64_t>& expected_shape);
std::vector<std::int32_t> read_i32(const std::string& path, const std::vector<std::int64_t>& expected_shape);
std::vector<std::int64_t> read_i64(const std::string& path, const std::vector<std::int64_t>& expected_shape);

// The bytes of a version 1.0 .npy file (version 2.0 only if the header would not fit 1.0).
// Throws Error if the shape is negative or its element count differs from data's.
std::vector<std::byte> serialize(DType dtype, const std::vector<std::int64_t>& shape,
                                 std::span<const std::byte> data);

// Write a file (replacing it). Throw Error("<path>: cannot write: <reason>") on failure.
void write(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
           std::span<const std::byte> data);
void write_f32(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const float> data);
void write_i32(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const std::int32_t> data);
void write_i64(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const std::int64_t> data);

}  // namespace rnnjit::npy
