// rnnjit: cuBLAS, loaded at run time (dlopen of libcublas.so.<major of the toolkit's cuBLAS>,
// e.g. libcublas.so.13), and the one GEMM the GPU executor needs: a row-major sgemm.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>

#include <string>

#include "runtime/cuda/plan_runner.hpp"

namespace rnnjit::cuda {

#define RNNJIT_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetMathMode) X(cublasSgemm)

struct CublasApi {
#define RNNJIT_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  RNNJIT_CUBLAS_FUNCTIONS(RNNJIT_DECLARE_ENTRY)
#undef RNNJIT_DECLARE_ENTRY
  decltype(&::cublasGetStatusString) status_string = nullptr;  // optional
  std::string path;
};

std::string cublas_soname();  // "libcublas.so.13"
// Loaded once per process; throws Error("cuBLAS not available: libcublas.so.13 ...").
const CublasApi& cublas();

void check(cublasStatus_t s, const std::string& what);

// A cuBLAS handle bound to one stream, in FP32 math (no TF32: results comparable to the CPU's).
class BlasHandle {
 public:
  explicit BlasHandle(CUstream stream);
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  // Row-major C = op(A) op(B) + beta C through cuBLAS's column-major sgemm (column_major.hpp).
  void gemm(const GemmCall& g) const;

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace rnnjit::cuda
