#include "kernels/gate_reference.hpp"

#include <cmath>

#include <fmt/format.h>

#include "kernels/activation.hpp"
#include "kernels/gate_clip.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float tanhf_(float x) { return std::tanh(x); }

GateClip<float> gate_clip_of(const KernelDesc& d) {
  return d.gate_clip_bits ? GateClip<float>(d.gate_clip(), sigmoidf, tanhf_) : GateClip<float>{};
}

// ONNX's activations other than the cell's own (KernelDesc::activation), computed in their own
// loop: one function per role, so every cell's math reads as ONNX writes it.
void gate_forward_custom(const KernelDesc& d, const GateForwardArgs& a) {
  const std::int64_t H = d.hidden, GH = d.gates() * H;
  const GateClip<float> clip = gate_clip_of(d);
  const ActivationFunction fa = d.activation_of(ActivationRole::f), ga = d.activation_of(ActivationRole::g),
                           ha = d.activation_of(ActivationRole::h);
  const auto f = [&](float x) { return activate(fa, x); };
  const auto g = [&](float x) { return activate(ga, x); };
  const auto h = [&](float x) { return activate(ha, x); };
  const float* pp = d.peephole ? a.peephole : nullptr;
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* gx = a.gx + n * d.gx_stride();
    const float* gh = a.gh + n * GH;
    const float* h_prev = a.h_prev + n * d.ld_h;
    float* h_out = a.h_out + n * d.ld_h;
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(d.cols); ++j) {
      auto pre = [&](std::int64_t gate, float peep = 0.0f) {
        return clip(gx[gate * H + j] + a.bias_ih[gate * H + j] + gh[gate * H + j] + a.bias_hh[gate * H + j] + peep);
      };
      switch (d.cell_kind()) {
        case CellKind::rnn_tanh: case CellKind::rnn_sigmoid: case CellKind::rnn_relu: h_out[j] = f(pre(0)); break;
        case CellKind::lstm: {
          const float cp = a.c_prev[n * H + j];
          const float i = f(pre(0, pp ? pp[j] * cp : 0.0f));
          const float fg = d.input_forget ? 1.0f - i : f(pre(1, pp ? pp[H + j] * cp : 0.0f));
          float c = fg * cp + i * g(pre(2));
          if (d.clip_bits && (c > d.clip() || c < -d.clip())) c = c > 0.0f ? d.clip() : -d.clip();  // NaN stays
          const float o = f(pre(3, pp ? pp[2 * H + j] * c : 0.0f));
          a.c_out[n * H + j] = c;
          h_out[j] = o * h(c);
          break;
        }
        case CellKind::gru: {
          const float r = f(pre(0)), z = f(pre(1));
          const float hn = gh[2 * H + j] + a.bias_hh[2 * H + j];
          const float nn = g(clip(gx[2 * H + j] + a.bias_ih[2 * H + j] + r * hn));
          h_out[j] = nn + z * (h_prev[j] - nn);
          break;
        }
        case CellKind::gru_reset_before:
          if (d.part == 0) {
            h_out[j] = f(pre(0)) * h_prev[j];
            a.c_out[n * H + j] = f(pre(1));
          } else {
            const float nn = g(pre(2));
            h_out[j] = nn + a.c_prev[n * H + j] * (h_prev[j] - nn);
          }
          break;
      }
    }
  }
}

}  // namespace

void gate_forward_reference(const KernelDesc& d, const GateForwardArgs& a) {
  if (d.custom_activations()) {
    if (d.training || d.pass_kind() != Pass::forward)
      throw Error(fmt::format("{}: activations other than the cell's own are for inference only", kernel_name(d)));
    return gate_forward_custom(d, a);
  }
  const std::int64_t H = d.hidden, G = d.gates(), GH = G * H, R = d.reserve_gates() * H;
  const GateClip<float> gclip = gate_clip_of(d);
  const float* pp = d.peephole ? a.peephole : nullptr;
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* gx = a.gx + n * d.gx_stride();
    const float* gh = a.gh + n * GH;
    const float* h_prev = a.h_prev + n * d.ld_h;
    float* h_out = a.h_out + n * d.ld_h;
    float* gates = d.training ? a.gates + n * R : nullptr;
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(d.cols); ++j) {
      // The clipped pre-activation of gate g (peep: its peephole term).
      auto pre = [&](std::int64_t g, float peep = 0.0f) {
        return gclip(gx[g * H + j] + a.bias_ih[g * H + j] + gh[g * H + j] + a.bias_hh[g * H + j] + peep);
      };
      switch (d.cell_kind()) {
        case CellKind::rnn_tanh: h_out[j] = std::tanh(pre(0)); break;
        case CellKind::rnn_sigmoid: h_out[j] = sigmoidf(pre(0)); break;
        case CellKind::rnn_relu: {
          const float v = pre(0);
          h_out[j] = v > 0.0f ? v : d.relu_alpha_bits ? d.relu_alpha() * v : (v == v ? 0.0f : v);
          break;
        }
        case CellKind::lstm: {
          const float cp = a.c_prev[n * H + j];
          const float i = sigmoidf(pre(0, pp ? pp[j] * cp : 0.0f));
          const float f = d.input_forget ? 1.0f - i : sigmoidf(pre(1, pp ? pp[H + j] * cp : 0.0f));
          const float g = std::tanh(pre(2));
          float c = f * cp + i * g;
          if (d.clip_bits && (c > d.clip() || c < -d.clip())) c = c > 0.0f ? d.clip() : -d.clip();  // NaN stays
          const float o = sigmoidf(pre(3, pp ? pp[2 * H + j] * c : 0.0f));
          a.c_out[n * H + j] = c;
          h_out[j] = o * std::tanh(c);
          if (gates) { gates[j] = i; gates[H + j] = f; gates[2 * H + j] = g; gates[3 * H + j] = o; }
          break;
        }
        case CellKind::gru: {
          const float r = sigmoidf(pre(0)), z = sigmoidf(pre(1));
          const float hn = gh[2 * H + j] + a.bias_hh[2 * H + j];
          const float nn = std::tanh(gclip(gx[2 * H + j] + a.bias_ih[2 * H + j] + r * hn));
          h_out[j] = nn + z * (h_prev[j] - nn);
          if (gates) { gates[j] = r; gates[H + j] = z; gates[2 * H + j] = hn; gates[3 * H + j] = nn; }
          break;
        }
        case CellKind::gru_reset_before:
          if (d.part == 0) {  // r * h_prev for n's recurrent GEMM, z for part 1
            const float r = sigmoidf(pre(0)), z = sigmoidf(pre(1));
            h_out[j] = r * h_prev[j];
            a.c_out[n * H + j] = z;
            if (gates) { gates[j] = r; gates[H + j] = z; }
          } else {            // gh_n = W_hn (r * h_prev)
            const float nn = std::tanh(pre(2));
            h_out[j] = nn + a.c_prev[n * H + j] * (h_prev[j] - nn);
            if (gates) gates[2 * H + j] = nn;
          }
          break;
      }
    }
  }
}

void gate_backward_reference(const KernelDesc& d, const GateBackwardArgs& a) {
  if (d.custom_activations())
    throw Error(fmt::format("{}: activations other than the cell's own are for inference only", kernel_name(d)));
  const std::int64_t H = d.hidden, R = d.reserve_gates() * H;
  const GateClip<float> gclip = gate_clip_of(d);
  const float* pp = d.peephole ? a.peephole : nullptr;
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* dy = a.dy ? a.dy + n * d.dy_stride() : nullptr;
    float* gates = a.gates + n * R;
    float* dh_carry = a.dh_carry + n * H;
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(d.cols); ++j) {
      // (Part 1 of the reset-before GRU reads neither: dy may be null there.)
      const auto dh_at = [&] { return dy[j] + dh_carry[j]; };
      switch (d.cell_kind()) {
        case CellKind::rnn_tanh: {
          const float dh = dh_at(), h = a.h[n * d.ld_h + j];
          gates[j] = dh * (1.0f - h * h) * gclip.tanh_pass(h);
          break;
        }
        case CellKind::rnn_sigmoid: {
          const float dh = dh_at(), h = a.h[n * d.ld_h + j];
          gates[j] = dh * h * (1.0f - h) * gclip.sigmoid_pass(h);
          break;
        }
        case CellKind::rnn_relu: {
          const float dh = dh_at(), h = a.h[n * d.ld_h + j], alpha = d.relu_alpha();
          const float pass = gclip.relu_pass(h, alpha);
          gates[j] = h > 0.0f ? dh * pass : d.relu_alpha_bits ? alpha * dh * pass : 0.0f;
          break;
        }
        case CellKind::lstm: {
          const float dh = dh_at(), i = gates[j], f = gates[H + j], g = gates[2 * H + j], o = gates[3 * H + j];
          const float c = a.c[n * H + j], cp = a.c_prev[n * H + j];
          const float tc = std::tanh(c);
          const float dO = dh * tc * o * (1.0f - o) * gclip.sigmoid_pass(o);
          float dc = a.dc_carry[n * H + j] + dh * o * (1.0f - tc * tc) + (pp ? dO * pp[2 * H + j] : 0.0f);
          if (d.clip_bits && !(-d.clip() < c && c < d.clip())) dc = 0.0f;  // held at a bound
          const float di = dc * (d.input_forget ? g - cp : g) * i * (1.0f - i) * gclip.sigmoid_pass(i);
          const float df = d.input_forget ? 0.0f : dc * cp * f * (1.0f - f) * gclip.sigmoid_pass(f);
          gates[j] = di;
          gates[H + j] = df;
          gates[2 * H + j] = dc * i * (1.0f - g * g) * gclip.tanh_pass(g);
          gates[3 * H + j] = dO;
          a.dc_carry[n * H + j] = dc * f + (pp ? di * pp[j] + df * pp[H + j] : 0.0f);
          break;
        }
        case CellKind::gru: {
          const float dh = dh_at(), r = gates[j], z = gates[H + j], hn = gates[2 * H + j], nn = gates[3 * H + j];
          const float dn = dh * (1.0f - z) * (1.0f - nn * nn) * gclip.tanh_pass(nn);
          gates[j] = dn * hn * r * (1.0f - r) * gclip.sigmoid_pass(r);
          gates[H + j] = dh * (a.h_prev[n * d.ld_h + j] - nn) * z * (1.0f - z) * gclip.sigmoid_pass(z);
          gates[2 * H + j] = dn * r;
          gates[3 * H + j] = dn;
          dh_carry[j] = dh * z;
          break;
        }
        case CellKind::gru_reset_before: {
          const float r = gates[j], z = gates[H + j], nn = gates[2 * H + j], hp = a.h_prev[n * d.ld_h + j];
          if (d.part == 0) {  // dz, dn (W_hn and b_hn see dn directly) and the direct term dh z
            const float dh = dh_at();
            gates[H + j] = dh * (hp - nn) * z * (1.0f - z) * gclip.sigmoid_pass(z);
            gates[2 * H + j] = dh * (1.0f - z) * (1.0f - nn * nn) * gclip.tanh_pass(nn);
            dh_carry[j] = dh * z;
          } else {            // d(r * h_prev) reaches r and h_prev
            const float drh = a.d_reset_h[n * H + j];
            gates[j] = drh * hp * r * (1.0f - r) * gclip.sigmoid_pass(r);
            dh_carry[j] += drh * r;
          }
          break;
        }
      }
    }
  }
}

}  // namespace rnnjit
