#include "kernels/gemm_reference.hpp"

namespace rnnjit {

void gemm_reference(const KernelDesc& d, const GemmArgs& g) {
  const std::int64_t width = std::int64_t{d.vectors} * 16 - (d.n_tail ? 16 - d.n_tail : 0);
  for (std::int64_t i = 0; i < d.rows; ++i)
    for (std::int64_t j = 0; j < width; ++j) {
      float sum = 0.0f;  // accumulated in k order, as the generated kernel does
      for (std::int64_t k = 0; k < g.k; ++k)
        sum += g.a[i * d.a_row_stride + k * d.a_k_stride] * g.b[k * d.b_k_stride + j];
      float& c = g.c[i * d.c_row_stride + j];
      c = d.beta ? c + sum : sum;
    }
}

}  // namespace rnnjit
