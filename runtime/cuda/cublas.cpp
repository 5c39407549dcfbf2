#include "runtime/cuda/cublas.hpp"

#include <variant>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/column_major.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/dynlib.hpp"

namespace rnnjit::cuda {
namespace {

#define RNNJIT_STRINGIFY2(x) #x
#define RNNJIT_STRINGIFY(x) RNNJIT_STRINGIFY2(x)

std::variant<CublasApi, std::string> load() {
  static auto* library = new DynamicLibrary(toolkit_candidates(cublas_soname()));  // never unloaded
  if (!library->loaded()) return fmt::format("cuBLAS not available: {} not found ({})", cublas_soname(), library->error());
  CublasApi api;
  api.path = library->path();
#define RNNJIT_RESOLVE_ENTRY(name)                                                                      \
  api.name = reinterpret_cast<decltype(api.name)>(library->symbol(RNNJIT_STRINGIFY(name)));            \
  if (!api.name) return fmt::format("cuBLAS not available: {} has no {}", api.path, RNNJIT_STRINGIFY(name));
  RNNJIT_CUBLAS_FUNCTIONS(RNNJIT_RESOLVE_ENTRY)
#undef RNNJIT_RESOLVE_ENTRY
  api.status_string = reinterpret_cast<decltype(api.status_string)>(library->symbol("cublasGetStatusString"));
  return api;
}

}  // namespace

std::string cublas_soname() { return fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR); }

const CublasApi& cublas() {
  static const std::variant<CublasApi, std::string> loaded = load();
  if (const auto* why = std::get_if<std::string>(&loaded)) throw Error(*why);
  return std::get<CublasApi>(loaded);
}

void check(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& api = cublas();
  throw Error(fmt::format("{}: {} ({})", what, api.status_string ? api.status_string(s) : "cuBLAS error",
                          static_cast<int>(s)));
}

BlasHandle::BlasHandle(CUstream stream) {
  const CublasApi& api = cublas();
  check(api.cublasCreate(&handle_), "cublasCreate");
  check(api.cublasSetStream(handle_, stream), "cublasSetStream");
  check(api.cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

BlasHandle::~BlasHandle() {
  if (!handle_) return;
  try {
    ContextScope scope;
    cublas().cublasDestroy(handle_);
  } catch (...) {  // only when the driver itself has gone away
  }
}

void BlasHandle::gemm(const GemmCall& g) const {
  const CublasApi& api = cublas();
  auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  const float one = 1.0f;
  const ColumnMajorGemm c = column_major(g);
  const std::string what = fmt::format("cublasSgemm m={} n={} k={}", g.m, g.n, g.k);
  check(api.cublasSgemm(handle_, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k, &one, c.first, c.ld_first,
                        c.second, c.ld_second, &c.beta, c.c, c.ldc),
        what);
}

}  // namespace rnnjit::cuda
