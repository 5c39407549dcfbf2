// rnnjit: what each step of a plan touches. For every operand of every step, the element
// range [begin, end) it reads or writes in its buffer or region, over all time steps. Used to
// check a plan against its buffers before anything runs, and by the tests to prove that
// regions are exactly as large as what the executor touches.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "codegen/plan.hpp"

namespace rnnjit {

struct Extent {
  Operand operand;
  std::int64_t begin = 0, end = 0;  // elements, relative to the buffer or region start
};

void for_each_extent(const Plan& plan, const std::vector<Stage>& stages, const std::function<void(const Extent&)>& fn);

// Elements each caller-visible buffer must hold for this plan's config and shape.
std::int64_t buffer_elements(const Plan& plan, Buffer buffer);

// Throws Error naming the step and operand if any operand reaches outside its buffer/region.
void check_extents(const Plan& plan);

// The calls (bit 0 pack_weights, 1 forward, 2 backward_data, 3 backward_weights) whose steps
// use each region; a region no step uses (one the API fills) counts as used by every call.
inline constexpr std::uint8_t kAllCalls = 0xf;
std::vector<std::uint8_t> region_calls(const Plan& plan);

// Workspace regions hold nothing from one call to the next, so two regions that no call uses
// both may overlap: lays the workspace regions out again, each at the lowest aligned offset
// where it meets no region of a call it shares, so the workspace is as large as its largest
// call needs rather than the sum of all (training: the weight gradients' A panels lie where
// the forward call's input projections were).
void overlay_workspace_of_calls(Plan& plan);

}  // namespace rnnjit
