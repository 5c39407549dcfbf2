// rnnjit: the CPU executor. It walks a Plan's stages, calling OpenBLAS for the GEMMs and the
// compiled gate kernels inside each recurrence. It decides nothing: every size, operand and
// kernel comes from the plan.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "codegen/plan.hpp"
#include "runtime/kernel.hpp"

namespace rnnjit {

// Addresses of the buffers a plan's operands name (Buffer::workspace/reserve are byte bases).
struct Bindings {
  std::array<const float*, 17> buffers{};
  std::byte* workspace = nullptr;
  std::byte* reserve = nullptr;

  void bind(Buffer b, const float* p) { buffers[static_cast<std::size_t>(b)] = p; }
};

class Executor {
 public:
  Executor(std::shared_ptr<const Plan> plan, std::vector<std::shared_ptr<const CompiledKernel>> kernels);

  const Plan& plan() const { return *plan_; }
  const std::vector<std::shared_ptr<const CompiledKernel>>& kernels() const { return kernels_; }

  // accumulate: GEMMs and column sums that would overwrite their output add to it instead.
  void run(const std::vector<Stage>& stages, const Bindings& bindings, bool accumulate = false) const;

 private:
  float* resolve(const Operand& o, const Bindings& b) const;
  void run_lane(const std::vector<Step>& lane, const Bindings& b, bool accumulate) const;
  void run_recurrence(const RecurrenceStep& r, const Bindings& b) const;

  std::shared_ptr<const Plan> plan_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;
};

}  // namespace rnnjit
