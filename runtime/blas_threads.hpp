// rnnjit: OpenBLAS on a given number of threads for the length of a scope, the caller's setting
// restored after. The executor runs it on one thread while its own threads share its GEMMs;
// the benchmark's GEMM ceiling runs it on the bench's threads.
#pragma once

namespace rnnjit {

class BlasThreads {
 public:
  // threads > 0: OpenBLAS runs on that many threads until the scope ends; 0: left as it is.
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_ = 0;  // the setting to restore; 0 when nothing was set
};

}  // namespace rnnjit
