#include "runtime/cuda/dynlib.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace rnnjit::cuda {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: the symbols stay out of the global namespace; the libraries load their own
    // dependencies (cuBLAS its cuBLASLt, cuDNN its sub-libraries) by themselves.
    handle_ = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      path_ = c;
      return;
    }
    const char* why = ::dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : c);
  }
  error_ = tried;
}

DynamicLibrary::~DynamicLibrary() {
  // Never dlclose: the CUDA libraries register atexit handlers and threads that must not
  // outlive their code. The handles live as long as the process.
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

std::vector<std::string> toolkit_candidates(const std::string& soname) {
  std::vector<std::string> c{soname};
#ifdef RNNJIT_CUDA_LIBRARY_DIR
  c.push_back(std::string(RNNJIT_CUDA_LIBRARY_DIR) + "/" + soname);
#endif
  return c;
}

}  // namespace rnnjit::cuda
