// rnnjit: ONNX's activation functions in the network description (rnnjit/config.hpp): their
// names, the cell's own function for each role, and the checks validate() makes.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "rnnjit/config.hpp"

namespace rnnjit {
namespace {

constexpr std::array<std::string_view, kActivationKinds> kNames = {
    "standard", "Relu",        "Tanh", "Sigmoid", "Affine",   "LeakyRelu",
    "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

constexpr std::string_view kRoleNames[kActivationRoles] = {"f", "g", "h"};

}  // namespace

std::string_view to_string(Activation kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kNames.size() ? kNames[i] : "unknown";
}

Activation parse_activation(std::string_view name) {
  for (std::size_t i = 1; i < kNames.size(); ++i)
    if (iequals(name, kNames[i])) return static_cast<Activation>(i);
  throw Error(fmt::format("unknown activation '{}' (expected one of ONNX's: {})", name,
                          fmt::join(kNames.begin() + 1, kNames.end(), ", ")));
}

int activation_alphas(Activation kind) {
  switch (kind) {
    case Activation::affine: case Activation::leaky_relu: case Activation::thresholded_relu:
    case Activation::scaled_tanh: case Activation::hard_sigmoid: case Activation::elu: return 1;
    default: return 0;
  }
}

int activation_betas(Activation kind) {
  return kind == Activation::affine || kind == Activation::scaled_tanh || kind == Activation::hard_sigmoid ? 1 : 0;
}

int activation_role_count(CellKind cell) { return cell == CellKind::lstm ? 3 : is_vanilla(cell) ? 1 : 2; }

ActivationFunction cell_activation(CellKind cell, ActivationRole role, float relu_alpha) {
  const int r = static_cast<int>(role);
  if (r >= activation_role_count(cell)) return {};
  switch (cell) {
    case CellKind::rnn_tanh: return {Activation::tanh};
    case CellKind::rnn_sigmoid: return {Activation::sigmoid};
    case CellKind::rnn_relu:
      return relu_alpha > 0.0f ? ActivationFunction{Activation::leaky_relu, relu_alpha} : ActivationFunction{Activation::relu};
    default: return {r == 0 ? Activation::sigmoid : Activation::tanh};  // LSTM f, g, h; GRU f, g
  }
}

ActivationFunction RnnConfig::activation(int direction, ActivationRole role) const {
  const ActivationFunction& f = activations[static_cast<std::size_t>(direction)][static_cast<std::size_t>(role)];
  return f.kind == Activation::standard ? cell_activation(cell, role, relu_alpha) : f;
}

bool RnnConfig::custom_activations(int direction) const {
  for (int r = 0; r < activation_role_count(cell); ++r) {
    const auto role = static_cast<ActivationRole>(r);
    if (!(activation(direction, role) == cell_activation(cell, role, relu_alpha))) return true;
  }
  return false;
}

std::string describe(const ActivationFunction& f) {
  const int alphas = activation_alphas(f.kind), betas = activation_betas(f.kind);
  if (!alphas && !betas) return std::string(to_string(f.kind));
  if (!betas) return fmt::format("{}(alpha={})", to_string(f.kind), f.alpha);
  return fmt::format("{}(alpha={}, beta={})", to_string(f.kind), f.alpha, f.beta);
}

// Called by validate(config): kinds in range, parameters finite and only where the function
// reads them, nothing set for a role or direction the network does not have.
void validate_activations(const RnnConfig& c) {
  for (int d = 0; d < 2; ++d)
    for (int r = 0; r < kActivationRoles; ++r) {
      const ActivationFunction& f = c.activations[static_cast<std::size_t>(d)][static_cast<std::size_t>(r)];
      const std::string where = fmt::format("activations[{}][{}] (direction {}, role {})", d, r, d, kRoleNames[r]);
      if (static_cast<int>(f.kind) >= kActivationKinds)
        throw Error(fmt::format("{}: activation kind {} is not one of standard, {}", where, static_cast<int>(f.kind),
                                fmt::join(kNames.begin() + 1, kNames.end(), ", ")));
      const bool unset = f == ActivationFunction{};
      if (!unset && d >= c.directions())
        throw Error(fmt::format("{}: the network has one direction, so only direction 0 takes activations", where));
      if (!unset && r >= activation_role_count(c.cell))
        throw Error(fmt::format("{}: {} has activation roles {} only", where, to_string(c.cell),
                                fmt::join(kRoleNames, kRoleNames + activation_role_count(c.cell), ", ")));
      if (!std::isfinite(f.alpha) || !std::isfinite(f.beta))
        throw Error(fmt::format("{}: {} alpha {} and beta {} must be finite", where, to_string(f.kind), f.alpha,
                                f.beta));
      if (f.alpha != 0.0f && !activation_alphas(f.kind))
        throw Error(fmt::format("{}: {} takes no alpha, got {}", where, to_string(f.kind), f.alpha));
      if (f.beta != 0.0f && !activation_betas(f.kind))
        throw Error(fmt::format("{}: {} takes no beta, got {}", where, to_string(f.kind), f.beta));
    }
}

std::string describe_activations(const RnnConfig& c) {
  std::string s;
  for (int d = 0; d < c.directions(); ++d) {
    s += d ? "; " : "";
    for (int r = 0; r < activation_role_count(c.cell); ++r)
      s += (r ? ", " : "") + describe(c.activation(d, static_cast<ActivationRole>(r)));
  }
  return "[" + s + "]";
}

}  // namespace rnnjit
