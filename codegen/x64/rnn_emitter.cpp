// rnnjit: vanilla RNN gate kernels, h = act(gx + b_ih + gh + b_hh) with act tanh, the logistic
// sigmoid or relu (leaky with a slope alpha below zero), or forward in inference ONNX's
// activation of the descriptor's role f. Backward needs only h_t: tanh' = 1 - h^2,
// sigmoid' = h (1 - h), relu' = [h > 0] (leaky: alpha where h <= 0, the same lanes as the
// pre-activation's for alpha >= 0); a gate clip clamps act's argument and stops the gradient
// where it held.
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

RnnForward::RnnForward(const KernelDesc& desc) : ForwardGateEmitter(desc, 1) {
  row_pointer(h_out_, offsetof(GateForwardArgs, h_out), h_row_bytes());
  generate();
}

void RnnForward::body(int count, bool masked) {
  for (int u = 0; u < count; ++u) {
    load(slot(u, 0), at(gx_, 0, u), masked);
    accumulate(slot(u, 0), at(gh_, 0, u), masked);
    accumulate(slot(u, 0), at(bias_ih_, 0, u), masked);
    accumulate(slot(u, 0), at(bias_hh_, 0, u), masked);
  }
  clamp_gates(slots(count, 0));
  const ActivationFunction custom = desc_.activation_of(ActivationRole::f);
  if (desc_.custom_activations() && custom.kind != rnnjit::Activation::standard) {
    act_.apply(custom, slots(count, 0));  // ONNX's f (a leaky slope is then the function's alpha)
  } else {
    switch (desc_.cell_kind()) {
      case CellKind::rnn_tanh: act_.tanh(slots(count, 0)); break;
      case CellKind::rnn_sigmoid: act_.sigmoid(slots(count, 0)); break;
      default:
        if (!desc_.relu_alpha_bits) {
          act_.relu(slots(count, 0));
          break;
        }
        for (int u = 0; u < count; ++u)  // v <= 0 (or NaN): alpha * v, as the reference's v > 0 ? v : alpha * v
          scale_by_alpha(slot(u, 0), compare(slot(u, 0), act_.constant(Constant::zero), 0x1A /*NGT_UQ*/));
    }
  }
  for (int u = 0; u < count; ++u) store(at(h_out_, 0, u), slot(u, 0), masked);
}

RnnBackward::RnnBackward(const KernelDesc& desc) : GateEmitter(desc, 3) {
  row_pointer(dy_, offsetof(GateBackwardArgs, dy), dy_row_bytes(), 1);
  row_pointer(h_, offsetof(GateBackwardArgs, h), h_row_bytes(), 1);
  row_pointer(gates_, offsetof(GateBackwardArgs, gates), hidden_bytes(), 1);
  row_pointer(dh_carry_, offsetof(GateBackwardArgs, dh_carry), hidden_bytes());
  generate();
}

void RnnBackward::body(int count, bool masked) {
  enum { dh, h, t };
  for (int u = 0; u < count; ++u) {
    auto R = [&](int k) { return slot(u, k); };
    load(R(dh), at(dy_, 0, u), masked);
    accumulate(R(dh), at(dh_carry_, 0, u), masked);
    load(R(h), at(h_, 0, u), masked);
    if (desc_.cell_kind() == CellKind::rnn_tanh) {
      vmovaps(R(t), act_.one());
      vfnmadd231ps(R(t), R(h), R(h));
      vmulps(R(dh), R(dh), R(t));
      zero_unless_passed(R(dh), R(h), Activation::tanh);
    } else if (desc_.cell_kind() == CellKind::rnn_sigmoid) {
      vmulps(R(dh), R(dh), R(h));  // (dh h) (1 - h), the reference's order
      vsubps(R(t), act_.one(), R(h));
      vmulps(R(dh), R(dh), R(t));
      zero_unless_passed(R(dh), R(h), Activation::sigmoid);
    } else if (desc_.relu_alpha_bits) {
      scale_by_alpha(R(dh), compare(R(h), act_.constant(Constant::zero), 0x1A /*NGT_UQ*/));
      zero_unless_passed(R(dh), R(h), Activation::relu);
    } else {
      zero_unless(R(dh), compare(R(h), act_.constant(Constant::zero), 0x1E /*GT_OQ*/));
      zero_unless_passed(R(dh), R(h), Activation::relu);
    }
    store(at(gates_, 0, u), R(dh), masked);
  }
}

}  // namespace rnnjit::x64
