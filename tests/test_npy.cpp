// The .npy reader and writer: round trips, and every rejection with a message that names the
// file and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "rnnjit/npy.hpp"

namespace {

namespace fs = std::filesystem;
using rnnjit::Error;
namespace npy = rnnjit::npy;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("rnnjit_test_npy_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes to a file in the temp dir and returns its path.
  std::string write_raw(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  // A version-1.0 file with the given header text (padded to 64 bytes) and data bytes.
  static std::string v1(std::string header, const std::string& data) {
    const std::size_t padded = (10 + header.size() + 1 + 63) / 64 * 64 - 10;
    header.append(padded - header.size() - 1, ' ');
    header.push_back('\n');
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(static_cast<char>(header.size() & 0xff));
    out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
    out.append(header);
    out.append(data);
    return out;
  }
  // The same for versions 2.0/3.0 (4-byte header length).
  static std::string v23(int major, std::string header, const std::string& data) {
    header.push_back('\n');
    std::string out("\x93NUMPY", 6);
    out.push_back(static_cast<char>(major));
    out.push_back('\0');
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    out.append(header);
    out.append(data);
    return out;
  }
  static std::string f32_header(const std::string& shape) {
    return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  }

  // Expects read(path) to throw an Error whose message starts with the path and contains `problem`.
  void expect_rejected(const std::string& p, const std::string& problem) const {
    try {
      npy::read(p);
      ADD_FAILURE() << p << ": expected an error containing '" << problem << "'";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(problem), std::string::npos) << "message: " << msg << "\nexpected to contain: " << problem;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    }
  }

  fs::path dir_;
};

std::string floats(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

TEST_F(NpyTest, RoundTripF32) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const std::vector<std::int64_t>& shape :
       std::vector<std::vector<std::int64_t>>{{}, {0}, {1}, {7}, {3, 4}, {2, 3, 5}, {1, 1, 1, 1}, {4, 0, 3}, {300, 257}}) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> data(static_cast<std::size_t>(n));
    for (float& v : data) v = dist(rng);
    const std::string p = path("a.npy");
    npy::write_f32(p, shape, data);
    EXPECT_EQ(npy::read_f32(p, shape), data) << npy::shape_string(shape);
    const npy::Array a = npy::read(p);
    EXPECT_EQ(a.dtype, npy::DType::f32);
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.elements(), n);
    // numpy.save's layout: version 1.0, data on a 64-byte boundary, header ending in '\n'.
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), 10u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    EXPECT_EQ(bytes.size(), 10 + header_len + data.size() * 4);
  }
}

TEST_F(NpyTest, RoundTripIntegers) {
  const std::vector<std::int32_t> i32{1, -2, 3, 2147483647, -2147483647 - 1, 0};
  npy::write_i32(path("i.npy"), {2, 3}, i32);
  EXPECT_EQ(npy::read_i32(path("i.npy"), {2, 3}), i32);
  const std::vector<std::int64_t> i64{INT64_MIN, -1, 0, 1, INT64_MAX};
  npy::write_i64(path("l.npy"), {5}, i64);
  EXPECT_EQ(npy::read_i64(path("l.npy"), {5}), i64);
  EXPECT_EQ(npy::read(path("l.npy")).dtype, npy::DType::i64);
}

TEST_F(NpyTest, ShapeString) {
  EXPECT_EQ(npy::shape_string(std::vector<std::int64_t>{}), "()");
  EXPECT_EQ(npy::shape_string(std::vector<std::int64_t>{3}), "(3,)");
  EXPECT_EQ(npy::shape_string(std::vector<std::int64_t>{3, 4}), "(3, 4)");
}

TEST_F(NpyTest, AcceptsWhatNumpyWrites) {
  // Versions 2.0 and 3.0, double quotes, no trailing comma, Python 2 longs, odd whitespace.
  const std::string data = floats({1, 2, 3, 4, 5, 6});
  const std::vector<float> want{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(npy::read_f32(write_raw("v2.npy", v23(2, f32_header("(2, 3)"), data)), {2, 3}), want);
  EXPECT_EQ(npy::read_f32(write_raw("v3.npy", v23(3, f32_header("(6,)"), data)), {6}), want);
  EXPECT_EQ(npy::read_f32(write_raw("dq.npy", v1(R"({"descr": "<f4", "fortran_order": False, "shape": (3, 2)})", data)),
                          {3, 2}),
            want);
  EXPECT_EQ(npy::read_f32(write_raw("long.npy", v1(f32_header("(2L, 3L)"), data)), {2, 3}), want);
  EXPECT_EQ(npy::read_f32(write_raw("ws.npy", v1("{ 'shape':(1,6 ,) ,'fortran_order' :False,'descr':'<f4'}", data)),
                          {1, 6}),
            want);
  EXPECT_EQ(npy::read_f32(write_raw("empty.npy", v1(f32_header("(0, 3)"), "")), {0, 3}), std::vector<float>{});
}

TEST_F(NpyTest, RejectsMissingFile) { expect_rejected(path("nope.npy"), "cannot open: No such file or directory"); }

TEST_F(NpyTest, RejectsDirectory) {
  fs::create_directories(dir_ / "d.npy");
  expect_rejected(path("d.npy"), "cannot");
}

TEST_F(NpyTest, RejectsBadMagic) {
  expect_rejected(write_raw("empty.npy", ""), "bad magic");
  expect_rejected(write_raw("text.npy", "hello world, this is not numpy"), "bad magic");
  expect_rejected(write_raw("almost.npy", std::string("\x93NUMPZ\x01\x00\x10\x00", 10)), "bad magic");
}

TEST_F(NpyTest, RejectsTruncatedPreamble) {
  expect_rejected(write_raw("p1.npy", std::string("\x93NUM", 4)), "truncated");
  expect_rejected(write_raw("p2.npy", std::string("\x93NUMPY\x01", 7)), "truncated");
  expect_rejected(write_raw("p3.npy", std::string("\x93NUMPY\x02\x00\x10\x00", 10)), "truncated");
}

TEST_F(NpyTest, RejectsUnsupportedVersion) {
  std::string f = v1(f32_header("(1,)"), floats({1}));
  f[6] = '\x04';
  expect_rejected(write_raw("v4.npy", f), "unsupported .npy format version 4.0");
  f[6] = '\x01';
  f[7] = '\x01';
  expect_rejected(write_raw("v11.npy", f), "unsupported .npy format version 1.1");
  f[6] = '\x00';
  f[7] = '\x00';
  expect_rejected(write_raw("v0.npy", f), "unsupported .npy format version 0.0");
}

TEST_F(NpyTest, RejectsOverlongHeader) {
  std::string f = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4) + "{}";
  expect_rejected(write_raw("huge.npy", f), "header length 2147483647 exceeds the limit of 65536 bytes");
  // Just over the limit, with all the bytes present.
  std::string header = f32_header("(1,)");
  header.append(65537 - header.size(), ' ');
  expect_rejected(write_raw("big.npy", v23(3, header.substr(0, 65536), floats({1}))), "header length 65537 exceeds");
}

TEST_F(NpyTest, RejectsTruncatedHeader) {
  std::string f = v1(f32_header("(1,)"), "");
  expect_rejected(write_raw("th.npy", f.substr(0, 40)), "truncated header");
}

TEST_F(NpyTest, RejectsUnparseableHeader) {
  const std::string d = floats({1});
  const std::pair<const char*, const char*> cases[] = {
      {"not a dict", "cannot parse header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", "cannot parse header dict"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'fortran_order': False, 'shape': (1,)}", "missing key 'descr'"},
      {"{'descr': '<f4', 'shape': (1,)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "'fortran_order' is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "cannot parse header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "unexpected text after the closing"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "cannot parse header dict"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (1,)}", "'descr' is not a string"},
      {"{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (1,)}", "escape sequences"},
      {"", "cannot parse header dict"},
  };
  int i = 0;
  for (const auto& [header, problem] : cases) {
    SCOPED_TRACE(header);
    std::string file = "h";
    file += std::to_string(i++);
    file += ".npy";
    expect_rejected(write_raw(file, v1(header, d)), problem);
  }
  // Non-ASCII bytes in a version 1.0 header.
  expect_rejected(write_raw("latin.npy", v1("{'descr': '<f4\xe9', 'fortran_order': False, 'shape': (1,)}", d)),
                  "non-ASCII");
}

TEST_F(NpyTest, RejectsOtherDtypesByName) {
  const std::string d(8, '\0');
  for (const char* dtype : {"<f8", ">f4", "<f2", "|u1", "<u4", ">i8", "|b1", "<c8", "|O", "<U3"}) {
    const std::string header = std::string("{'descr': '") + dtype + "', 'fortran_order': False, 'shape': (1,)}";
    expect_rejected(write_raw("dtype.npy", v1(header, d)), std::string("unsupported dtype '") + dtype + "'");
  }
  expect_rejected(write_raw("rec.npy", v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", d)),
                  "structured");
  // A descr with control characters is escaped, keeping the message on one line.
  expect_rejected(write_raw("ctl.npy", v1("{'descr': '<f4\x01\r', 'fortran_order': False, 'shape': (1,)}", d)),
                  "unsupported dtype '<f4\\x01\\x0d'");
}

TEST_F(NpyTest, RejectsFortranOrder) {
  expect_rejected(write_raw("f.npy", v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}",
                                        floats({1, 2, 3, 4}))),
                  "fortran_order True is not supported");
}

TEST_F(NpyTest, RejectsBadShapes) {
  const std::string d = floats({1});
  expect_rejected(write_raw("neg.npy", v1(f32_header("(-1, 3)"), d)), "negative dimension -1 in shape");
  expect_rejected(write_raw("big.npy", v1(f32_header("(99999999999999999999,)"), d)),
                  "dimension 99999999999999999999 in shape overflows");
  expect_rejected(write_raw("prod.npy", v1(f32_header("(4294967296, 4294967296)"), d)), "overflows: too many elements");
  expect_rejected(write_raw("bytes.npy", v1(f32_header("(4611686018427387904,)"), d)), "overflows: too many bytes");
  std::string dims = "(";
  for (int i = 0; i < 33; ++i) dims += "1, ";
  expect_rejected(write_raw("dims.npy", v1(f32_header(dims + ")"), d)), "more than 32 dimensions");
}

TEST_F(NpyTest, RejectsTruncatedData) {
  expect_rejected(write_raw("t.npy", v1(f32_header("(2, 3)"), floats({1, 2, 3, 4, 5}))),
                  "truncated data: shape (2, 3) of float32 needs 24 bytes, file has 20");
  expect_rejected(write_raw("t2.npy", v1(f32_header("(1000000000000,)"), "")), "truncated data");
}

TEST_F(NpyTest, RejectsTrailingGarbage) {
  expect_rejected(write_raw("g.npy", v1(f32_header("(2,)"), floats({1, 2}) + "xyz")),
                  "trailing garbage: 3 bytes after the 8 bytes of data");
}

TEST_F(NpyTest, RejectsShapeAndDtypeMismatch) {
  const std::string p = path("x.npy");
  npy::write_f32(p, {3, 4}, std::vector<float>(12));
  try {
    npy::read_f32(p, {3, 5});
    ADD_FAILURE() << "expected a shape mismatch";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), p + ": shape (3, 4) does not match expected (3, 5)");
  }
  try {
    npy::read_i32(p, {3, 4});
    ADD_FAILURE() << "expected a dtype mismatch";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), p + ": dtype '<f4' (float32) does not match expected '<i4' (int32)");
  }
}

TEST_F(NpyTest, WriterRejectsInconsistentShapes) {
  EXPECT_THROW(npy::write_f32(path("w.npy"), {2, 3}, std::vector<float>(5)), Error);
  EXPECT_THROW(npy::write_f32(path("w.npy"), {-1}, std::vector<float>(0)), Error);
  try {
    npy::write_f32((dir_ / "no" / "such" / "dir.npy").string(), {1}, std::vector<float>(1));
    ADD_FAILURE() << "expected a write failure";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dir.npy: cannot write: "), std::string::npos) << e.what();
  }
}

// Every prefix and many single-byte corruptions of a valid file: parse() must either succeed
// or throw Error, never crash (run under RNNJIT_SANITIZE=ON to check memory safety as well).
TEST_F(NpyTest, SurvivesCorruption) {
  const std::vector<std::byte> good = npy::serialize(npy::DType::f32, {2, 3}, std::as_bytes(std::span<const float>(
                                                                                   std::vector<float>(6, 1.0f))));
  int accepted = 0;
  for (std::size_t n = 0; n <= good.size(); ++n) {
    try {
      npy::parse(std::span(good).first(n), "prefix");
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(accepted, 1);  // only the whole file
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] = static_cast<std::byte>(rng() & 0xff);
    try {
      const npy::Array a = npy::parse(bad, "fuzz");
      EXPECT_EQ(static_cast<std::int64_t>(a.data.size()), a.elements() * static_cast<std::int64_t>(npy::item_size(a.dtype)));
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("fuzz: ", 0), 0u);
    }
  }
}

}  // namespace
