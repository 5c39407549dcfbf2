// rnnjit: the AVX-512 int8 quantizer (runtime/int8_quantizers.hpp), 16 lanes at a time.
#include <immintrin.h>

#include <algorithm>

#include "codegen/int8_unit.hpp"
#include "kernels/int8_reference.hpp"
#include "runtime/int8_quantizers.hpp"

namespace rnnjit::int8 {
namespace {

// GCC 12 takes the undefined pass-through operand inside its masked-load and narrowing
// intrinsics for a read of uninitialised memory (GCC bug 105593), as in executor_bf16.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

__mmask16 first_lanes(std::int64_t n) {
  n = std::clamp<std::int64_t>(n, 0, 16);
  return static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
}

}  // namespace

__attribute__((target("avx512f,avx512bw"))) void quantize_rows_avx512(std::uint8_t* dst, float* scales,
                                                                      std::int64_t k_pad, const float* src,
                                                                      std::int64_t lda, std::int64_t k,
                                                                      std::int64_t r0, std::int64_t r1,
                                                                      std::int32_t levels,
                                                                      std::int32_t zero_point_value) {
  const __m512i lo = _mm512_set1_epi32(-levels), hi = _mm512_set1_epi32(levels);
  const __m512i zero_point = _mm512_set1_epi32(zero_point_value);
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* in = src + r * lda;
    __m512 most = _mm512_setzero_ps();
    for (std::int64_t kk = 0; kk < k; kk += 16)
      most = _mm512_max_ps(most, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(k - kk), in + kk)));
    const RowScale s = row_scale(_mm512_reduce_max_ps(most), levels);
    scales[r] = s.scale;
    const __m512 inv = _mm512_set1_ps(s.inv);
    std::uint8_t* out = dst + r * k_pad;
    for (std::int64_t kk = 0; kk < k_pad; kk += 16) {  // zeros past k: q = zero_point
      const __m512 x = _mm512_maskz_loadu_ps(first_lanes(k - kk), in + kk);
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv));
      q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), zero_point);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kk), _mm512_cvtepi32_epi8(q));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

QuantizeRows quantize_rows_for(Int8Unit unit) {
  return int8_kernel_isa(unit) == Isa::avx512 ? quantize_rows_avx512 : quantize_rows_avx2;
}

}  // namespace rnnjit::int8
