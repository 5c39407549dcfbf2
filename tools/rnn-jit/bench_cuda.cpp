#include "tools/rnn-jit/bench_cuda.hpp"

#include <memory>

#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/cudnn_peer.hpp"

namespace rnnjit::cli {
namespace {

// The benchmark's tensors in device memory: inputs uploaded, outputs and gradients allocated.
struct DeviceData {
  cuda::DeviceArray w, x, dy, y, hy, cy, dx, dw;
  DeviceData(const RnnConfig& c, const Shape& s, HostData h)
      : w(h.w.size_bytes()), x(h.x.size_bytes()), dy(h.dy.size_bytes()),
        y(static_cast<std::size_t>(y_elements(c, s)) * sizeof(float)),
        hy(static_cast<std::size_t>(state_elements(c, s)) * sizeof(float)),
        cy(c.cell == CellKind::lstm ? static_cast<std::size_t>(cell_state_elements(c, s)) * sizeof(float) : 0),
        dx(h.x.size_bytes()), dw(h.w.size_bytes()) {
    w.upload(h.w.data(), h.w.size_bytes());
    x.upload(h.x.data(), h.x.size_bytes());
    dy.upload(h.dy.data(), h.dy.size_bytes());
  }
};

}  // namespace

std::function<void()> cuda_rnnjit_iteration(const RnnConfig& config, const Shape& shape, Mode mode, HostData data) {
  auto ex = std::make_shared<Execution>(Rnn(config, {.device = Device::cuda}).prepare(shape, mode));
  auto d = std::make_shared<DeviceData>(config, shape, data);
  auto lengths = std::make_shared<const std::vector<std::int32_t>>(data.lengths.begin(), data.lengths.end());
  return [ex, d, lengths, mode] {
    ex->forward(d->w.span<const float>(), {.x = d->x.span<const float>(), .y = d->y.span<float>(),
                                           .hy = d->hy.span<float>(), .cy = d->cy.span<float>(),
                                           .seq_lengths = *lengths});
    if (mode == Mode::training) {
      ex->backward_data(d->w.span<const float>(), {.dy = d->dy.span<const float>(), .dx = d->dx.span<float>()});
      ex->backward_weights({.x = d->x.span<const float>(), .dweights = d->dw.span<float>()});
    }
  };
}

std::function<void()> cudnn_iteration(const RnnConfig& config, const Shape& shape, Mode mode, HostData data,
                                      cuda::CudnnAlgo algo) {
  auto peer = std::make_shared<cuda::CudnnRnn>(config, shape, mode, algo);
  auto d = std::make_shared<DeviceData>(config, shape, data);
  peer->set_weights(d->w.span<const float>().data());
  return [peer, d, mode] {
    peer->forward({.x = d->x.span<const float>().data(), .y = d->y.span<float>().data(),
                   .hy = d->hy.span<float>().data(), .cy = d->cy.span<float>().data()});
    if (mode == Mode::training)
      peer->backward({.x = d->x.span<const float>().data(), .y = d->y.span<float>().data(),
                      .dy = d->dy.span<const float>().data(), .dx = d->dx.span<float>().data(),
                      .dweights = d->dw.span<float>().data()});
  };
}

}  // namespace rnnjit::cli
