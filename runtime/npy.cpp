#include "rnnjit/npy.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include <sys/stat.h>

namespace rnnjit::npy {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes
constexpr std::size_t kMagicSize = 6;
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw Error(fmt::format("{}: {}", name, problem));
}

// Text from a file, made safe for a one-line message: non-printable bytes escaped, long text cut.
std::string printable(std::string_view s, std::size_t limit = 40) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > limit) out += "...";
  return out;
}

// ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } ----

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  struct Result {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  Result parse() {
    Result r;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{', "expected '{' at the start of the header dict");
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string("a quoted key");
      skip_ws();
      expect(':', fmt::format("expected ':' after key '{}'", printable(key)));
      skip_ws();
      if (key == "descr") {
        if (have_descr) bad("duplicate key 'descr'");
        have_descr = true;
        if (peek() == '[') fail(name_, "unsupported dtype: structured (record) arrays are not supported");
        if (peek() != '\'' && peek() != '"') bad("'descr' is not a string");
        r.descr = parse_string("a dtype string");
      } else if (key == "fortran_order") {
        if (have_order) bad("duplicate key 'fortran_order'");
        have_order = true;
        r.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (have_shape) bad("duplicate key 'shape'");
        have_shape = true;
        r.shape = parse_shape();
      } else {
        bad(fmt::format("unexpected key '{}'", printable(key)));
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') break;
      bad("expected ',' or '}' after a value");
    }
    ++i_;  // '}'
    skip_ws();
    if (i_ != s_.size()) bad("unexpected text after the closing '}'");
    if (!have_descr) bad("missing key 'descr'");
    if (!have_order) bad("missing key 'fortran_order'");
    if (!have_shape) bad("missing key 'shape'");
    return r;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(name_, fmt::format("cannot parse header dict: {} (at offset {})", why, i_));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool at_end() const { return i_ >= s_.size(); }
  void skip_ws() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& why) {
    if (at_end() || s_[i_] != c) bad(why);
    ++i_;
  }
  bool consume_word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    const std::size_t end = i_ + w.size();
    if (end < s_.size()) {
      const char c = s_[end];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') return false;
    }
    i_ = end;
    return true;
  }

  // A Python string literal without escapes (numpy never writes any in these headers).
  std::string parse_string(const char* what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad(fmt::format("expected {}", what));
    ++i_;
    std::string out;
    for (;;) {
      if (at_end()) bad("unterminated string");
      const char c = s_[i_++];
      if (c == q) break;
      if (c == '\\') bad("escape sequences in strings are not supported");
      if (c == '\n') bad("newline inside a string");
      out += c;
    }
    return out;
  }

  bool parse_bool() {
    if (consume_word("True")) return true;
    if (consume_word("False")) return false;
    bad("'fortran_order' is not True or False");
  }

  std::int64_t parse_dim() {
    if (peek() == '-') {
      const std::size_t start = i_;
      ++i_;
      while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      fail(name_, fmt::format("negative dimension {} in shape", printable(s_.substr(start, i_ - start))));
    }
    if (peek() < '0' || peek() > '9') bad("expected an integer dimension in 'shape'");
    const std::size_t start = i_;
    std::int64_t v = 0;
    bool overflow = false;
    while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') {
      const int digit = s_[i_] - '0';
      if (v > (kInt64Max - digit) / 10) overflow = true;
      if (!overflow) v = v * 10 + digit;
      ++i_;
    }
    if (overflow)
      fail(name_, fmt::format("dimension {} in shape overflows a 64-bit integer", printable(s_.substr(start, i_ - start))));
    if (peek() == 'L' || peek() == 'l') ++i_;  // Python 2 longs, as old numpy wrote them
    return v;
  }

  std::vector<std::int64_t> parse_shape() {
    expect('(', "'shape' is not a tuple");
    std::vector<std::int64_t> shape;
    skip_ws();
    if (peek() == ')') {
      ++i_;
      return shape;
    }
    for (;;) {
      skip_ws();
      if (shape.size() >= kMaxDims)
        fail(name_, fmt::format("shape has more than {} dimensions", kMaxDims));
      shape.push_back(parse_dim());
      skip_ws();
      if (peek() == ',') {
        ++i_;
        skip_ws();
        if (peek() == ')') break;
        continue;
      }
      if (peek() == ')') {
        // A one-element tuple needs its comma: "(3)" is the integer 3, not a tuple.
        if (shape.size() == 1) bad("'shape' is not a tuple (a one-element tuple needs a trailing comma)");
        break;
      }
      bad("expected ',' or ')' in 'shape'");
    }
    ++i_;  // ')'
    return shape;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::string& name_;
};

std::optional<DType> dtype_from_descr(std::string_view d) {
  for (DType t : {DType::f32, DType::i32, DType::i64})
    if (d == descr(t)) return t;
  return std::nullopt;
}

std::uint32_t load_le(const std::byte* p, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

struct Layout {
  DType dtype;
  std::vector<std::int64_t> shape;
  std::size_t data_offset;
  std::size_t data_bytes;
};

Layout parse_layout(std::span<const std::byte> bytes, const std::string& name) {
  const std::size_t n = bytes.size();
  // Magic.
  const std::size_t cmp = n < kMagicSize ? n : kMagicSize;
  if (cmp == 0 || std::memcmp(bytes.data(), kMagic, cmp) != 0)
    fail(name, "not a .npy file (bad magic: does not start with \\x93NUMPY)");
  if (n < kMagicSize + 2) fail(name, fmt::format("truncated: {} bytes is too short for a .npy preamble", n));
  // Version.
  const auto major = static_cast<unsigned>(bytes[6]);
  const auto minor = static_cast<unsigned>(bytes[7]);
  if ((major < 1 || major > 3) || minor != 0)
    fail(name, fmt::format("unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", major, minor));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = kMagicSize + 2 + len_bytes;
  if (n < preamble) fail(name, fmt::format("truncated: {} bytes is too short for a version {}.0 preamble", n, major));
  const std::uint32_t header_len = load_le(bytes.data() + kMagicSize + 2, len_bytes);
  if (header_len > kMaxHeaderBytes)
    fail(name, fmt::format("header length {} exceeds the limit of {} bytes", header_len, kMaxHeaderBytes));
  if (n - preamble < header_len)
    fail(name, fmt::format("truncated header: header length is {} bytes but only {} follow the preamble", header_len,
                           n - preamble));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + preamble), header_len);
  if (major < 3) {
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80)
        fail(name, fmt::format("cannot parse header dict: non-ASCII byte in a version {}.0 header", major));
  }
  const HeaderParser::Result h = HeaderParser(text, name).parse();

  const std::optional<DType> dtype = dtype_from_descr(h.descr);
  if (!dtype)
    fail(name, fmt::format("unsupported dtype '{}' (expected '<f4', '<i4' or '<i8')", printable(h.descr)));
  if (h.fortran_order) fail(name, "fortran_order True is not supported (expected a C-order array)");

  std::int64_t elements = 1;
  for (std::int64_t d : h.shape) {
    if (d < 0) fail(name, fmt::format("negative dimension {} in shape", d));  // parser rejects these already
    if (__builtin_mul_overflow(elements, d, &elements))
      fail(name, fmt::format("shape {} overflows: too many elements", shape_string(h.shape)));
  }
  std::int64_t data_bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::int64_t>(item_size(*dtype)), &data_bytes))
    fail(name, fmt::format("shape {} overflows: too many bytes of data", shape_string(h.shape)));

  const std::size_t data_offset = preamble + header_len;
  const std::size_t available = n - data_offset;
  if (static_cast<std::uint64_t>(data_bytes) > available)
    fail(name, fmt::format("truncated data: shape {} of {} needs {} bytes, file has {}", shape_string(h.shape),
                           type_name(*dtype), data_bytes, available));
  if (static_cast<std::uint64_t>(data_bytes) < available)
    fail(name, fmt::format("trailing garbage: {} bytes after the {} bytes of data", available - data_bytes,
                           data_bytes));
  return {*dtype, h.shape, data_offset, static_cast<std::size_t>(data_bytes)};
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void grow(std::vector<std::byte>& bytes, std::size_t size, const std::string& path) {
  try {
    bytes.resize(size);
  } catch (const std::exception&) {  // bad_alloc, length_error
    fail(path, fmt::format("cannot read: file too large to hold in memory ({} bytes)", size));
  }
}

template <typename T>
std::vector<T> copy_as(const Array& array) {
  std::vector<T> out(array.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), array.data.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

std::string_view descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
  }
  return "?";
}

std::string_view type_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

std::size_t item_size(DType dtype) { return dtype == DType::i64 ? 8 : 4; }

std::int64_t Array::elements() const {
  std::int64_t e = 1;
  for (std::int64_t d : shape) e *= d;
  return e;
}

std::string shape_string(std::span<const std::int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

Array parse(std::span<const std::byte> bytes, const std::string& name) {
  const Layout layout = parse_layout(bytes, name);
  Array a;
  a.dtype = layout.dtype;
  a.shape = layout.shape;
  const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset);
  a.data.assign(first, first + static_cast<std::ptrdiff_t>(layout.data_bytes));
  return a;
}

Array read(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::vector<std::byte> bytes;
  // Size the buffer from a regular file's size (one allocation for large arrays); the loop
  // below still reads to the end whatever the size said.
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) == 0) {
    if (S_ISDIR(st.st_mode)) fail(path, "cannot read: Is a directory");
    if (S_ISREG(st.st_mode) && st.st_size > 0) grow(bytes, static_cast<std::size_t>(st.st_size) + 1, path);
  }
  std::size_t used = 0;
  for (;;) {
    if (used == bytes.size()) grow(bytes, used < 65536 ? 65536 : 2 * used, path);
    const std::size_t got = std::fread(bytes.data() + used, 1, bytes.size() - used, f.get());
    used += got;
    if (got == 0) {
      if (std::ferror(f.get())) fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
      break;
    }
  }
  bytes.resize(used);
  const Layout layout = parse_layout(bytes, path);
  Array a;
  a.dtype = layout.dtype;
  a.shape = layout.shape;
  // Reuse the file buffer: drop the preamble and header in place.
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset));
  if (bytes.capacity() - bytes.size() > bytes.size() / 4 + 4096) bytes.shrink_to_fit();
  a.data = std::move(bytes);
  return a;
}

void expect_shape(const Array& array, const std::vector<std::int64_t>& expected, const std::string& name) {
  if (array.shape != expected)
    fail(name, fmt::format("shape {} does not match expected {}", shape_string(array.shape), shape_string(expected)));
}

void expect_dtype(const Array& array, DType dtype, const std::string& name) {
  if (array.dtype != dtype)
    fail(name, fmt::format("dtype '{}' ({}) does not match expected '{}' ({})", descr(array.dtype),
                           type_name(array.dtype), descr(dtype), type_name(dtype)));
}

std::vector<float> as_f32(const Array& array, const std::string& name) {
  expect_dtype(array, DType::f32, name);
  return copy_as<float>(array);
}
std::vector<std::int32_t> as_i32(const Array& array, const std::string& name) {
  expect_dtype(array, DType::i32, name);
  return copy_as<std::int32_t>(array);
}
std::vector<std::int64_t> as_i64(const Array& array, const std::string& name) {
  expect_dtype(array, DType::i64, name);
  return copy_as<std::int64_t>(array);
}

std::vector<float> read_f32(const std::string& path, const std::vector<std::int64_t>& expected_shape) {
  const Array a = read(path);
  expect_dtype(a, DType::f32, path);
  expect_shape(a, expected_shape, path);
  return copy_as<float>(a);
}
std::vector<std::int32_t> read_i32(const std::string& path, const std::vector<std::int64_t>& expected_shape) {
  const Array a = read(path);
  expect_dtype(a, DType::i32, path);
  expect_shape(a, expected_shape, path);
  return copy_as<std::int32_t>(a);
}
std::vector<std::int64_t> read_i64(const std::string& path, const std::vector<std::int64_t>& expected_shape) {
  const Array a = read(path);
  expect_dtype(a, DType::i64, path);
  expect_shape(a, expected_shape, path);
  return copy_as<std::int64_t>(a);
}

std::vector<std::byte> serialize(DType dtype, const std::vector<std::int64_t>& shape, std::span<const std::byte> data) {
  std::int64_t elements = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("cannot write shape {}: negative dimension", shape_string(shape)));
    if (__builtin_mul_overflow(elements, d, &elements))
      throw Error(fmt::format("cannot write shape {}: too many elements", shape_string(shape)));
  }
  if (shape.size() > kMaxDims)
    throw Error(fmt::format("cannot write shape {}: more than {} dimensions", shape_string(shape), kMaxDims));
  const std::size_t isz = item_size(dtype);
  if (data.size() % isz != 0 || static_cast<std::uint64_t>(elements) != data.size() / isz)
    throw Error(fmt::format("cannot write shape {}: it holds {} elements but the data has {}", shape_string(shape),
                            elements, data.size() / isz));

  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr(dtype),
                                 shape_string(shape));
  // Pad with spaces and end with '\n' so that the data starts on a 64-byte boundary.
  std::size_t preamble = kMagicSize + 2 + 2;
  unsigned major = 1;
  auto padded = [&](std::size_t pre) { return ((pre + dict.size() + 1 + 63) / 64) * 64 - pre; };
  if (padded(preamble) > 65535) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
  }
  const std::size_t header_len = padded(preamble);
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  std::vector<std::byte> out;
  out.reserve(preamble + header_len + data.size());
  for (std::size_t i = 0; i < kMagicSize; ++i) out.push_back(static_cast<std::byte>(kMagic[i]));
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (std::size_t i = 0; i < preamble - kMagicSize - 2; ++i)
    out.push_back(static_cast<std::byte>((header_len >> (8 * i)) & 0xff));
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
           std::span<const std::byte> data) {
  std::vector<std::byte> bytes;
  try {
    bytes = serialize(dtype, shape, data);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
  if (std::fclose(f.release()) != 0) fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
}

void write_f32(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const float> data) {
  write(path, DType::f32, shape, std::as_bytes(data));
}
void write_i32(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const std::int32_t> data) {
  write(path, DType::i32, shape, std::as_bytes(data));
}
void write_i64(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const std::int64_t> data) {
  write(path, DType::i64, shape, std::as_bytes(data));
}

}  // namespace rnnjit::npy
