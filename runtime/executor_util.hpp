// rnnjit: helpers that the CPU executor's files (runtime/executor*.cpp) share. Internal: no
// interface of the library includes it.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace rnnjit::executor_util {

inline void copy_floats(float* dst, const float* src, std::int64_t count) {
  std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

// Variable lengths: whether batch row n is past its sequence at time t.
inline bool past_end(const std::int32_t* lengths, std::int64_t n, std::int64_t t) { return lengths && t >= lengths[n]; }

// The same for row r of a time-major layout of `sequences` rows a step: (t, n) = (r / N, r % N).
inline bool row_past_end(const std::int32_t* lengths, std::int64_t sequences, std::int64_t r) {
  return past_end(lengths, r % sequences, r / sequences);
}

// Copies rows [kk0, kk1) of a k block of A^T (kn rows of A, lda apart, from its first row) into
// the row-block panels [row block][kk][m_r] of that block (runtime/executor_pack.cpp). Only
// generated GEMMs pack A: AVX-512 plans with the first, AVX2 plans with the second.
__attribute__((target("avx512f"))) void pack_a_panels(float* panels, const float* a, std::int64_t lda, std::int64_t m,
                                                       std::int64_t m_r, std::int64_t kn, std::int64_t kk0,
                                                       std::int64_t kk1);
__attribute__((target("avx2,fma"))) void pack_a_panels_avx2(float* panels, const float* a, std::int64_t lda,
                                                            std::int64_t m, std::int64_t m_r, std::int64_t kn,
                                                            std::int64_t kk0, std::int64_t kk1);

// In-register transpose of 16 rows of 16 floats: r[i][j] <- r[j][i] (runtime/executor_pack.cpp).
__attribute__((target("avx512f"))) void transpose_16x16(__m512 r[16]);

}  // namespace rnnjit::executor_util
