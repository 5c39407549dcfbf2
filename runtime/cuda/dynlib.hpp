// rnnjit: a shared library opened at run time (dlopen), so that librnnjit itself never depends
// on the CUDA driver, cuBLAS or cuDNN: a machine without them loads rnnjit and gets a clear
// error naming the library only when it asks for the GPU.
#pragma once

#include <string>
#include <vector>

namespace rnnjit::cuda {

class DynamicLibrary {
 public:
  // Tries each candidate (a soname searched the usual way, or a path) in order. On failure
  // error() says why, naming every candidate and dlerror()'s message.
  explicit DynamicLibrary(const std::vector<std::string>& candidates);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }  // the candidate that loaded
  void* symbol(const char* name) const;               // null when absent

 private:
  void* handle_ = nullptr;
  std::string error_, path_;
};

// Candidates for a toolkit library: its soname (LD_LIBRARY_PATH, the loader's cache), then the
// same name in the CUDA toolkit's library directory found at configure time.
std::vector<std::string> toolkit_candidates(const std::string& soname);

}  // namespace rnnjit::cuda
