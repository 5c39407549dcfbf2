// rnnjit: one pass of the plan walk (forward, backward data or backward weights) replayed as a
// CUDA graph. A long sequence is thousands of small launches (a cuBLAS GEMM and a gate kernel
// per step and direction) that the host issues more slowly than the GPU runs them; a graph
// queues them all with one launch, and the two directions of a layer, each on its own stream,
// then really overlap. A pass is captured the second time in a row it is called with the same
// walk key (PlanRunner::walk_key: the same addresses, seed and lengths) and replayed while the
// key stays the same, as a training loop or a serving engine that reuses its buffers calls it;
// any other call is issued directly, so a one-off call pays no capture. Where capturing fails,
// the pass is issued directly from then on (RNNJIT_VERBOSE says why). RNNJIT_CUDA_GRAPHS=0
// issues every call directly.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rnnjit::cuda {

class PassGraph {
 public:
  explicit PassGraph(std::string name) : name_(std::move(name)) {}
  ~PassGraph();
  PassGraph(const PassGraph&) = delete;
  PassGraph& operator=(const PassGraph&) = delete;

  // Queues the pass on `stream` (where `issue` queues it, forking any other streams from it and
  // joining them back): replays the graph captured for `key`, or captures `issue` into one and
  // launches it, or calls `issue`. Returns at once, like `issue`.
  void run(const std::vector<std::uint64_t>& key, CUstream stream, const std::function<void()>& issue);

 private:
  void drop();
  void launch(CUstream stream) const;
  // Captures `issue` on `stream` into exec_ (nothing runs); on failure returns why, exec_ null.
  std::string capture(CUstream stream, const std::function<void()>& issue);

  std::string name_;
  std::vector<std::uint64_t> key_;  // the last call's
  CUgraphExec exec_ = nullptr;      // captured for key_
  bool failed_ = false;             // a capture failed where direct issue worked: no more captures
};

// False when RNNJIT_CUDA_GRAPHS is "0".
bool graphs_enabled();

}  // namespace rnnjit::cuda
