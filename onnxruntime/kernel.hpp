// rnnjit's ONNX Runtime library: the kernels behind a node. RnnjitKernel runs it on rnnjit;
// BuiltinKernel hands it to ONNX Runtime's own CPU kernel (the default domain's nodes that rnnjit
// cannot run). The op table (custom_ops.cpp) makes one per node at session creation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "onnxruntime/rnn_node.hpp"

namespace rnnjit::ort {

// What the library did, for the tests (a silent fallback must fail them) and for users:
// rnnjit_onnxruntime_stats() in custom_ops.cpp.
struct Counters {
  std::atomic<std::uint64_t> rnnjit_kernels{0}, builtin_kernels{0}, rnnjit_runs{0}, builtin_runs{0}, weight_packs{0};
};
Counters& counters();

// A valid node that rnnjit does not run (an activation it lacks, ...): the default domain hands it
// to ONNX Runtime's kernel, com.rnnjit reports it.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(OrtKernelContext* ctx) = 0;
};

bool verbose();  // RNNJIT_VERBOSE set (not "0"): the library says what it decides, on stderr

std::unique_ptr<Kernel> make_rnnjit_kernel(const OrtKernelInfo* info, RnnNode node);
std::unique_ptr<Kernel> make_builtin_kernel(const OrtKernelInfo* info, RnnNode node);

}  // namespace rnnjit::ort
