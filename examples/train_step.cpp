// A training step of a 2-layer bidirectional LSTM through the rnnjit C++ API.
#include <cstdio>
#include <vector>

#include "rnnjit/rnn.hpp"

int main() {
  using namespace rnnjit;
  const RnnConfig config{.cell = CellKind::lstm, .input_size = 64, .hidden_size = 128, .num_layers = 2,
                         .bidirectional = true};
  const Shape shape{.seq_len = 50, .batch = 8};

  Rnn rnn(config);                                         // validates; picks the ISA and threads
  std::vector<float> w(rnn.weights_size(), 0.01f);         // canonical layout, PyTorch's names:
  auto w_hh = rnn.weight_layout().view(std::span(w), "weight_hh_l1_reverse");  // a [512, 128] view
  w_hh[0] = 0.02f;

  Execution ex = rnn.prepare(shape, Mode::training);       // plans and compiles, through the cache
  std::printf("workspace %zu bytes, reserve %zu bytes\n", ex.workspace_size(), ex.reserve_size());

  std::vector<float> x(x_elements(config, shape), 0.5f), y(y_elements(config, shape));
  std::vector<float> dy(y.size(), 1.0f), dx(x.size()), dw(w.size());
  for (int step = 0; step < 3; ++step) {                   // no allocation after the first step
    ex.forward(w, {.x = x, .y = y});                       // keeps what backward needs in the reserve
    ex.backward_data(w, {.dy = dy, .dx = dx});             // reuses it: no recomputation
    ex.backward_weights({.x = x, .dweights = dw});
  }
  const CacheStats stats = cache_stats();
  std::printf("y[0] = %f, dx[0] = %f, kernels compiled %llu, cache hits %llu\n", y[0], dx[0],
              static_cast<unsigned long long>(stats.kernel_misses), static_cast<unsigned long long>(stats.kernel_hits));
  return 0;
}
