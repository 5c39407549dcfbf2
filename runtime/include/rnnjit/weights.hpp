// rnnjit: the canonical flat parameter buffer and its PyTorch names.
//
// Per layer, per direction (forward, then reverse), in PyTorch's state_dict order:
//   weight_ih_l{k}[_reverse] [G*H, I_l]   weight_hh_l{k}[_reverse] [G*H, H]
//   bias_ih_l{k}[_reverse]   [G*H]        bias_hh_l{k}[_reverse]   [G*H]   (unless config.bias is false)
//   weight_hr_l{k}[_reverse] [P, H]       (LSTM with projection only; weight_hh is then [G*H, P])
//   weight_peephole_l{k}[_reverse] [3, H] (LSTM with peepholes only: rows P_i, P_f, P_o)
// I_l is input_size for l = 0 and the output width above: D*S, or S with sum_directions (S = P
// with a projection, else H).
// Gate order within G*H is PyTorch's: LSTM i,f,g,o; GRU r,z,n; RNN a single gate.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/config.hpp"

namespace rnnjit {

enum class ParamKind : std::uint8_t {
  weight_ih = 0, weight_hh = 1, bias_ih = 2, bias_hh = 3, weight_hr = 4, weight_peephole = 5
};

struct ParamBlock {
  std::string name;                 // PyTorch state_dict key, e.g. "bias_hh_l2_reverse"
  ParamKind kind;
  std::int64_t layer;
  int direction;                    // 0 forward, 1 reverse
  std::vector<std::int64_t> shape;  // PyTorch's shape
  std::int64_t offset;              // in elements, from the start of the buffer
  std::int64_t size;                // in elements
};

class WeightLayout {
 public:
  explicit WeightLayout(const RnnConfig& config);  // validates config

  const RnnConfig& config() const { return config_; }
  std::int64_t total_elements() const { return total_; }
  const std::vector<ParamBlock>& blocks() const { return blocks_; }
  const ParamBlock& block(std::int64_t layer, int direction, ParamKind kind) const;
  // Whether the layout has blocks of this kind (biases: unless config.bias is false).
  bool has(ParamKind kind) const;
  // Throws Error("no parameter named 'x' in <config>") for unknown names.
  const ParamBlock& find(const std::string& name) const;

  // A PyTorch-named view into a caller's canonical buffer (size checked).
  template <typename T>
  std::span<T> view(std::span<T> buffer, const std::string& name) const {
    check_buffer(static_cast<std::int64_t>(buffer.size()));
    const ParamBlock& b = find(name);
    return buffer.subspan(static_cast<std::size_t>(b.offset), static_cast<std::size_t>(b.size));
  }

 private:
  void check_buffer(std::int64_t elements) const;
  RnnConfig config_;
  std::vector<ParamBlock> blocks_;
  std::vector<ParamKind> kinds_;  // the blocks of one layer and direction, in order
  std::int64_t total_ = 0;
};

std::string param_name(ParamKind kind, std::int64_t layer, int direction);

}  // namespace rnnjit
