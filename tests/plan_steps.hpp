// rnnjit tests: every step of a call's stages (all lanes, in order), or of a whole plan.
#pragma once

#include "codegen/plan.hpp"

namespace rnnjit::test {

template <typename F>
void for_each_step(const std::vector<Stage>& stages, F f) {
  for (const Stage& stage : stages)
    for (const auto& lane : stage.lanes)
      for (const Step& step : lane) f(step);
}

template <typename F>
void for_each_step(const Plan& plan, F f) {
  for (const auto* stages : {&plan.pack_weights, &plan.forward, &plan.backward_data, &plan.backward_weights})
    for_each_step(*stages, f);
}

}  // namespace rnnjit::test
