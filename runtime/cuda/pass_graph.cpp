#include "runtime/cuda/pass_graph.hpp"

#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/log.hpp"

namespace rnnjit::cuda {

bool graphs_enabled() {
  const char* v = std::getenv("RNNJIT_CUDA_GRAPHS");
  return !(v && std::strcmp(v, "0") == 0);
}

PassGraph::~PassGraph() {
  try {
    drop();
  } catch (...) {
  }
}

void PassGraph::drop() {
  if (!exec_) return;
  ContextScope scope;
  driver().cuGraphExecDestroy(exec_);
  exec_ = nullptr;
}

void PassGraph::run(const std::vector<std::uint64_t>& key, CUstream stream, const std::function<void()>& issue) {
  const bool again = key == key_;
  if (!again) {
    drop();
    key_ = key;
  }
  if (again && exec_) {
    ContextScope scope;
    check(driver().cuGraphLaunch(exec_, stream), fmt::format("cuGraphLaunch ({})", name_));
    last_ = Queued::replayed;
    return;
  }
  if (again && !failed_ && graphs_enabled() && capture(stream, issue)) {
    ContextScope scope;
    check(driver().cuGraphLaunch(exec_, stream), fmt::format("cuGraphLaunch ({})", name_));
    last_ = Queued::captured;
    return;
  }
  issue();
  last_ = Queued::directly;
}

bool PassGraph::capture(CUstream stream, const std::function<void()>& issue) {
  ContextScope scope;
  const DriverApi& d = driver();
  std::string why;
  CUgraph graph = nullptr;
  // Thread-local: only this thread's calls are checked against the capture; other threads'
  // work on the device goes on.
  if (CUresult r = d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != CUDA_SUCCESS) {
    why = fmt::format("cuStreamBeginCapture: {}", describe(r));
  } else {
    try {
      issue();
    } catch (const std::exception& e) {
      why = e.what();
    }
    // Always ends the capture, also after a failure, which leaves the stream usable.
    if (CUresult r = d.cuStreamEndCapture(stream, &graph); r != CUDA_SUCCESS && why.empty())
      why = fmt::format("cuStreamEndCapture: {}", describe(r));
  }
  if (why.empty())
    if (CUresult r = d.cuGraphInstantiate(&exec_, graph, 0); r != CUDA_SUCCESS) {
      why = fmt::format("cuGraphInstantiate: {}", describe(r));
      exec_ = nullptr;
    }
  if (graph) d.cuGraphDestroy(graph);
  if (!why.empty()) {
    failed_ = true;
    log_verbose(fmt::format("cuda: {} is issued directly: it could not be captured as a graph ({})", name_, why));
    return false;
  }
  log_verbose(fmt::format("cuda: {} captured as a graph", name_));
  return true;
}

}  // namespace rnnjit::cuda
