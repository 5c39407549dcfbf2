#include "runtime/blas_threads.hpp"

#include <cblas.h>

namespace rnnjit {

BlasThreads::BlasThreads(int threads) {
  if (threads <= 0) return;
  saved_ = openblas_get_num_threads();
  openblas_set_num_threads(threads);
}

BlasThreads::~BlasThreads() {
  if (saved_ > 0) openblas_set_num_threads(saved_);
}

}  // namespace rnnjit
