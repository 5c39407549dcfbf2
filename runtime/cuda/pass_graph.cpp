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

void PassGraph::launch(CUstream stream) const {
  ContextScope scope;
  check(driver().cuGraphLaunch(exec_, stream), fmt::format("cuGraphLaunch ({})", name_));
}

void PassGraph::run(const std::vector<std::uint64_t>& key, CUstream stream, const std::function<void()>& issue) {
  if (key != key_) {  // new bindings: issued directly, captured if the next call repeats them
    drop();
    key_ = key;
    issue();
    return;
  }
  if (exec_) return launch(stream);
  if (failed_ || !graphs_enabled()) return issue();
  const std::string why = capture(stream, issue);
  if (why.empty()) return launch(stream);
  // Nothing ran. If the calls fail directly too, that error is the caller's and says nothing
  // about graphs; if they run, the capture is what failed, and is not tried again.
  issue();
  failed_ = true;
  log_verbose(fmt::format("cuda: {} is issued directly: it could not be captured as a graph ({})", name_, why));
}

std::string PassGraph::capture(CUstream stream, const std::function<void()>& issue) {
  ContextScope scope;
  const DriverApi& d = driver();
  std::string why;
  CUgraph graph = nullptr;
  // Thread-local: only this thread's calls are checked against the capture; other threads'
  // work on the device goes on.
  if (CUresult r = d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != CUDA_SUCCESS)
    return fmt::format("cuStreamBeginCapture: {}", describe(r));
  try {
    issue();
  } catch (const std::exception& e) {
    why = e.what();
  }
  // Always ends the capture, also after a failure, which leaves the stream usable.
  if (CUresult r = d.cuStreamEndCapture(stream, &graph); r != CUDA_SUCCESS && why.empty())
    why = fmt::format("cuStreamEndCapture: {}", describe(r));
  if (why.empty())
    if (CUresult r = d.cuGraphInstantiate(&exec_, graph, 0); r != CUDA_SUCCESS) {
      why = fmt::format("cuGraphInstantiate: {}", describe(r));
      exec_ = nullptr;
    }
  if (graph) d.cuGraphDestroy(graph);
  if (why.empty()) log_verbose(fmt::format("cuda: {} captured as a graph", name_));
  return why;
}

}  // namespace rnnjit::cuda
