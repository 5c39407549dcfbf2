#include "rnnjit/weights.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rnnjit {

std::string param_name(ParamKind kind, std::int64_t layer, int direction) {
  static constexpr const char* kNames[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr",
                                           "weight_peephole"};
  return fmt::format("{}_l{}{}", kNames[static_cast<int>(kind)], layer, direction ? "_reverse" : "");
}

WeightLayout::WeightLayout(const RnnConfig& config) : config_(config) {
  validate(config);
  const std::int64_t gh = config.gates() * config.hidden_size;
  kinds_ = {ParamKind::weight_ih, ParamKind::weight_hh};
  if (config.bias) kinds_.insert(kinds_.end(), {ParamKind::bias_ih, ParamKind::bias_hh});
  if (config.proj_size > 0) kinds_.push_back(ParamKind::weight_hr);
  if (config.peephole) kinds_.push_back(ParamKind::weight_peephole);
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    for (int d = 0; d < config.directions(); ++d) {
      const std::int64_t in = config.layer_input_size(l);
      const std::vector<std::int64_t> shapes[] = {{gh, in}, {gh, config.state_size()}, {gh}, {gh},
                                                  {config.proj_size, config.hidden_size}, {3, config.hidden_size}};
      for (ParamKind kind : kinds_) {
        const std::vector<std::int64_t>& shape = shapes[static_cast<int>(kind)];
        std::int64_t size = 1;
        for (std::int64_t e : shape) size *= e;
        blocks_.push_back({param_name(kind, l, d), kind, l, d, shape, total_, size});
        total_ += size;
      }
    }
  }
}

const ParamBlock& WeightLayout::block(std::int64_t layer, int direction, ParamKind kind) const {
  const auto position = std::find(kinds_.begin(), kinds_.end(), kind);
  if (layer < 0 || layer >= config_.num_layers || direction < 0 || direction >= config_.directions() ||
      position == kinds_.end())
    throw Error(fmt::format("no parameter block {} for layer {} direction {} in {}", static_cast<int>(kind), layer,
                            direction, describe(config_)));
  const std::int64_t per_direction = static_cast<std::int64_t>(kinds_.size());
  return blocks_[static_cast<std::size_t>((layer * config_.directions() + direction) * per_direction +
                                          (position - kinds_.begin()))];
}

bool WeightLayout::has(ParamKind kind) const { return std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end(); }

const ParamBlock& WeightLayout::find(const std::string& name) const {
  for (const ParamBlock& b : blocks_)
    if (b.name == name) return b;
  throw Error(fmt::format("no parameter named '{}' in {}", name, describe(config_)));
}

void WeightLayout::check_buffer(std::int64_t elements) const {
  if (elements != total_)
    throw Error(fmt::format("weight buffer has {} elements, expected {} for {}", elements, total_,
                            describe(config_)));
}

}  // namespace rnnjit
