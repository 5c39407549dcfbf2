#include "kernels/int8_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace rnnjit::int8 {

RowScale row_scale(float max_abs, std::int32_t levels) {
  if (!(max_abs > 0.0f)) return {};
  const float l = static_cast<float>(levels);
  return {max_abs / l, l / max_abs};
}

float max_abs(const float* v, std::int64_t n) {
  float m = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(v[i]));
  return m;
}

std::int32_t quantize(float v, float inv, std::int32_t levels) {
  const float scaled = v * inv;
  // vcvtps2dq: round to nearest even; NaN and out-of-range give INT32_MIN.
  const bool in_range = scaled >= -2147483648.0f && scaled < 2147483648.0f;
  const std::int32_t q = in_range ? static_cast<std::int32_t>(std::nearbyint(scaled))
                                  : std::numeric_limits<std::int32_t>::min();
  return std::clamp(q, -levels, levels);
}

float quantize_activation_row(const float* x, std::int64_t k, std::int64_t k_pad, std::uint8_t* dst,
                              ActivationQuantization aq) {
  const RowScale s = row_scale(max_abs(x, k), aq.levels);
  for (std::int64_t i = 0; i < k; ++i)
    dst[i] = static_cast<std::uint8_t>(quantize(x[i], s.inv, aq.levels) + aq.zero_point);
  for (std::int64_t i = k; i < k_pad; ++i) dst[i] = static_cast<std::uint8_t>(aq.zero_point);
  return s.scale;
}

void pack_panel(std::int8_t* panel, const float* w, std::int64_t ld, std::int64_t k, std::int64_t width,
                std::int64_t n_r, std::int32_t activation_zero_point) {
  const std::int64_t columns = 16 * n_r, data = int8_k(k) * columns;
  std::memset(panel, 0, static_cast<std::size_t>(int8_panel_bytes(n_r, k)));
  auto* compensation = reinterpret_cast<std::int32_t*>(panel + data);
  auto* scale = reinterpret_cast<float*>(panel + data + 4 * columns);
  for (std::int64_t c = 0; c < width; ++c) {
    const float* row = w + c * ld;
    const RowScale s = row_scale(max_abs(row, k));
    std::int32_t sum = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const std::int32_t q = quantize(row[kk], s.inv);
      panel[int8_packed_offset(n_r, kk, c)] = static_cast<std::int8_t>(q);
      sum += q;
    }
    compensation[c] = activation_zero_point * sum;
    scale[c] = s.scale;
  }
}

void vnni_gemm_reference(const KernelDesc& d, const Int8GemmArgs& g) {
  const std::int64_t width = std::int64_t{d.vectors} * 16 - (d.n_tail ? 16 - d.n_tail : 0);
  const std::int64_t k = g.k * kInt8TileK, n_r = d.b_k_stride, data = k * 16 * n_r;
  const auto* compensation = reinterpret_cast<const std::int32_t*>(g.b + data);
  const auto* scale = reinterpret_cast<const float*>(g.b + data + 64 * n_r);
  for (std::int64_t i = 0; i < d.rows; ++i)
    for (std::int64_t j = 0; j < width; ++j) {
      std::int32_t sum = 0;
      for (std::int64_t kk = 0; kk < k; ++kk)
        sum += std::int32_t{g.a[i * d.a_row_stride + kk]} * std::int32_t{g.b[int8_packed_offset(n_r, kk, j)]};
      const float v = static_cast<float>(sum - compensation[j]) * scale[j] * g.a_scale[i];
      float& c = g.c[i * d.c_row_stride + j];
      c = d.beta ? c + v : v;
    }
}

QuantizedMatrix quantize_matrix(const float* w, std::int64_t rows, std::int64_t cols) {
  QuantizedMatrix m{rows, cols, std::vector<std::int8_t>(static_cast<std::size_t>(rows * cols)),
                    std::vector<float>(static_cast<std::size_t>(rows))};
  for (std::int64_t r = 0; r < rows; ++r) {
    const RowScale s = row_scale(max_abs(w + r * cols, cols));
    for (std::int64_t c = 0; c < cols; ++c)
      m.q[static_cast<std::size_t>(r * cols + c)] = static_cast<std::int8_t>(quantize(w[r * cols + c], s.inv));
    m.scale[static_cast<std::size_t>(r)] = s.scale;
  }
  return m;
}

void quantized_matvec(const QuantizedMatrix& w, std::int64_t row0, std::int64_t rows, const float* x, float* y,
                      ActivationQuantization aq) {
  const RowScale s = row_scale(max_abs(x, w.cols), aq.levels);
  std::vector<std::int32_t> q(static_cast<std::size_t>(w.cols));
  for (std::int64_t c = 0; c < w.cols; ++c) q[static_cast<std::size_t>(c)] = quantize(x[c], s.inv, aq.levels);
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::int8_t* row = w.q.data() + (row0 + j) * w.cols;
    std::int32_t sum = 0;
    for (std::int64_t c = 0; c < w.cols; ++c) sum += q[static_cast<std::size_t>(c)] * std::int32_t{row[c]};
    y[j] = static_cast<float>(sum) * w.scale[static_cast<std::size_t>(row0 + j)] * s.scale;
  }
}

}  // namespace rnnjit::int8
