#include "kernels/gate_reference.hpp"

#include <cmath>

#include <fmt/format.h>

#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void gate_forward_reference(const KernelDesc& d, const GateForwardArgs& a) {
  const std::int64_t H = d.hidden, G = d.gates(), GH = G * H, R = d.reserve_gates() * H;
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* gx = a.gx + n * GH;
    const float* gh = a.gh + n * GH;
    const float* h_prev = a.h_prev + n * d.ld_h;
    float* h_out = a.h_out + n * d.ld_h;
    float* gates = d.training ? a.gates + n * R : nullptr;
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(d.cols); ++j) {
      auto pre = [&](std::int64_t g) { return gx[g * H + j] + a.bias_ih[g * H + j] + gh[g * H + j] + a.bias_hh[g * H + j]; };
      switch (d.cell_kind()) {
        case CellKind::rnn_tanh: h_out[j] = std::tanh(pre(0)); break;
        case CellKind::rnn_relu: { const float v = pre(0); h_out[j] = v > 0.0f ? v : (v == v ? 0.0f : v); break; }
        case CellKind::lstm: {
          const float i = sigmoidf(pre(0)), f = sigmoidf(pre(1)), g = std::tanh(pre(2)), o = sigmoidf(pre(3));
          float c = f * a.c_prev[n * H + j] + i * g;
          if (d.clip_bits && (c > d.clip() || c < -d.clip())) c = c > 0.0f ? d.clip() : -d.clip();  // NaN stays
          a.c_out[n * H + j] = c;
          h_out[j] = o * std::tanh(c);
          if (gates) { gates[j] = i; gates[H + j] = f; gates[2 * H + j] = g; gates[3 * H + j] = o; }
          break;
        }
        case CellKind::gru: {
          const float r = sigmoidf(pre(0)), z = sigmoidf(pre(1));
          const float hn = gh[2 * H + j] + a.bias_hh[2 * H + j];
          const float nn = std::tanh(gx[2 * H + j] + a.bias_ih[2 * H + j] + r * hn);
          h_out[j] = nn + z * (h_prev[j] - nn);
          if (gates) { gates[j] = r; gates[H + j] = z; gates[2 * H + j] = hn; gates[3 * H + j] = nn; }
          break;
        }
        case CellKind::gru_reset_before:
          if (d.part == 0) {  // r * h_prev for n's recurrent GEMM, z for part 1
            h_out[j] = sigmoidf(pre(0)) * h_prev[j];
            a.c_out[n * H + j] = sigmoidf(pre(1));
          } else {            // gh_n = W_hn (r * h_prev)
            const float nn = std::tanh(pre(2));
            h_out[j] = nn + a.c_prev[n * H + j] * (h_prev[j] - nn);
          }
          break;
      }
    }
  }
}

void gate_backward_reference(const KernelDesc& d, const GateBackwardArgs& a) {
  const std::int64_t H = d.hidden, R = d.reserve_gates() * H;
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* dy = a.dy + n * d.ld_h;
    float* gates = a.gates + n * R;
    float* dh_carry = a.dh_carry + n * H;
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(d.cols); ++j) {
      const float dh = dy[j] + dh_carry[j];
      switch (d.cell_kind()) {
        case CellKind::rnn_tanh: { const float h = a.h[n * d.ld_h + j]; gates[j] = dh * (1.0f - h * h); break; }
        case CellKind::rnn_relu: { const float h = a.h[n * d.ld_h + j]; gates[j] = h > 0.0f ? dh : 0.0f; break; }
        case CellKind::lstm: {
          const float i = gates[j], f = gates[H + j], g = gates[2 * H + j], o = gates[3 * H + j];
          const float tc = std::tanh(a.c[n * H + j]);
          const float c = a.c[n * H + j];
          float dc = a.dc_carry[n * H + j] + dh * o * (1.0f - tc * tc);
          if (d.clip_bits && !(-d.clip() < c && c < d.clip())) dc = 0.0f;  // held at a bound
          gates[j] = dc * g * i * (1.0f - i);
          gates[H + j] = dc * a.c_prev[n * H + j] * f * (1.0f - f);
          gates[2 * H + j] = dc * i * (1.0f - g * g);
          gates[3 * H + j] = dh * tc * o * (1.0f - o);
          a.dc_carry[n * H + j] = dc * f;
          break;
        }
        case CellKind::gru: {
          const float r = gates[j], z = gates[H + j], hn = gates[2 * H + j], nn = gates[3 * H + j];
          const float dn = dh * (1.0f - z) * (1.0f - nn * nn);
          gates[j] = dn * hn * r * (1.0f - r);
          gates[H + j] = dh * (a.h_prev[n * d.ld_h + j] - nn) * z * (1.0f - z);
          gates[2 * H + j] = dn * r;
          gates[3 * H + j] = dn;
          dh_carry[j] = dh * z;
          break;
        }
        case CellKind::gru_reset_before:  // the planner refuses its training on this backend
          throw Error(fmt::format("{}: no backward gate kernel for gru_reset_before", kernel_name(d)));
      }
    }
  }
}

}  // namespace rnnjit
