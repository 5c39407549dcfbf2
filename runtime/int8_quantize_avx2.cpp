// rnnjit: the AVX2 + FMA int8 quantizer (runtime/int8_quantizers.hpp), 8 lanes at a time: the
// AVX-512 one's steps with vmaskmovps loads for the row's tail (AVX2 has no opmask) and a byte
// shuffle for the narrowing (AVX2 has no vpmovdb).
#include <immintrin.h>

#include <algorithm>

#include "kernels/int8_reference.hpp"
#include "runtime/int8_quantizers.hpp"

namespace rnnjit::int8 {
namespace {

// The mask of vmaskmovps that loads the first n (clamped to 0..8) lanes.
__attribute__((target("avx2,fma"))) __m256i first_lanes(std::int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<std::int64_t>(n, 0, 8))), lane);
}

__attribute__((target("avx2,fma"))) float reduce_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

}  // namespace

__attribute__((target("avx2,fma"))) void quantize_rows_avx2(std::uint8_t* dst, float* scales, std::int64_t k_pad,
                                                            const float* src, std::int64_t lda, std::int64_t k,
                                                            std::int64_t r0, std::int64_t r1, std::int32_t levels,
                                                            std::int32_t zero_point_value) {
  const __m256i lo = _mm256_set1_epi32(-levels), hi = _mm256_set1_epi32(levels);
  const __m256i zero_point = _mm256_set1_epi32(zero_point_value);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // The low byte of each int32 (its value as int8 or uint8, as vpmovdb truncates), lane by lane
  // into the first 4 bytes of each 128-bit half, then both halves' into the first 8 bytes.
  const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                             0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i gather = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* in = src + r * lda;
    __m256 most = _mm256_setzero_ps();
    for (std::int64_t kk = 0; kk < k; kk += 8)
      most = _mm256_max_ps(most, _mm256_andnot_ps(sign, _mm256_maskload_ps(in + kk, first_lanes(k - kk))));
    const RowScale s = row_scale(reduce_max(most), levels);
    scales[r] = s.scale;
    const __m256 inv = _mm256_set1_ps(s.inv);
    std::uint8_t* out = dst + r * k_pad;
    for (std::int64_t kk = 0; kk < k_pad; kk += 8) {  // zeros past k: q = zero_point
      const __m256 x = _mm256_maskload_ps(in + kk, first_lanes(k - kk));
      __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(x, inv));
      q = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(q, lo), hi), zero_point);
      q = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(q, low_bytes), gather);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + kk), _mm256_castsi256_si128(q));
    }
  }
}

}  // namespace rnnjit::int8
