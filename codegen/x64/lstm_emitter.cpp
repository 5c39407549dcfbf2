// rnnjit: LSTM gate kernels (PyTorch gate order i, f, g, o).
//   forward:  i,f,o = sigmoid, g = tanh of (gx + b_ih + gh + b_hh), with the peepholes P_i c_prev,
//             P_f c_prev and P_o c added and the gate clip applied where the descriptor says;
//             f = 1 - i with input_forget; c = f c_prev + i g (clamped to [-clip, clip] with a
//             cell clip); h = o tanh(c). ONNX's activations (inference): the descriptor's role f
//             for i, f, o, g for g and h for tanh(c).
//   backward: from the stored i,f,g,o and c_t, c_{t-1}: do = dh tanh(c) o (1 - o); dc = dc_carry +
//             dh o (1 - tanh(c)^2) + do P_o (zero where the clip held c at a bound); the
//             pre-activation gradients written over the gates (each zero where the gate clip held
//             it), and dc_carry = dc f + di P_i + df P_f.
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

LstmForward::LstmForward(const KernelDesc& desc) : ForwardGateEmitter(desc, 4) {
  row_pointer(c_prev_, offsetof(GateForwardArgs, c_prev), hidden_bytes());
  row_pointer(h_out_, offsetof(GateForwardArgs, h_out), h_row_bytes());
  row_pointer(c_out_, offsetof(GateForwardArgs, c_out), hidden_bytes());
  if (desc.training) row_pointer(gates_, offsetof(GateForwardArgs, gates), 4 * hidden_bytes());
  if (desc.peephole) row_pointer(peephole_, offsetof(GateForwardArgs, peephole), 0);
  generate();
}

void LstmForward::body(int count, bool masked) {
  enum { i, f, g, o };
  const bool peephole = desc_.peephole, coupled = desc_.input_forget;
  const Xbyak::Xmm c_prev = scratch(0);  // free until the activations run
  for (int u = 0; u < count; ++u) {
    for (int k : {i, f, g, o}) {
      if (k == f && coupled) continue;  // f = 1 - i: its pre-activation is never formed
      load(slot(u, k), at(gx_, k, u), masked);
      accumulate(slot(u, k), at(gh_, k, u), masked);
      accumulate(slot(u, k), at(bias_ih_, k, u), masked);
      accumulate(slot(u, k), at(bias_hh_, k, u), masked);
    }
    if (peephole) {  // i and f see c_{t-1}; o sees c_t, added once c is known
      load(c_prev, at(c_prev_, 0, u), masked);
      accumulate_product(slot(u, i), c_prev, at(peephole_, 0, u), masked);
      if (!coupled) accumulate_product(slot(u, f), c_prev, at(peephole_, 1, u), masked);
    }
  }
  // The gates whose pre-activations are complete now: all but f when coupled and o with peepholes.
  std::vector<Xbyak::Xmm> sig;
  for (int k : {i, f, o}) {
    if ((k == f && coupled) || (k == o && peephole)) continue;
    for (const Xbyak::Xmm& z : slots(count, k)) sig.push_back(z);
  }
  std::vector<Xbyak::Xmm> clipped = sig;
  for (const Xbyak::Xmm& z : slots(count, g)) clipped.push_back(z);
  clamp_gates(clipped);
  activate(ActivationRole::f, Activation::sigmoid, sig);
  activate(ActivationRole::g, Activation::tanh, slots(count, g));
  for (int u = 0; u < count; ++u) {
    const Xbyak::Xmm I = slot(u, i), F = slot(u, f), G = slot(u, g), O = slot(u, o);
    if (coupled) vsubps(F, act_.one(), I);
    if (desc_.training) {
      store(at(gates_, i, u), I, masked);
      store(at(gates_, f, u), F, masked);
      store(at(gates_, g, u), G, masked);
      if (!peephole) store(at(gates_, o, u), O, masked);
    }
    // c = f * c_prev + i * g, in f's register.
    multiply(F, F, at(c_prev_, 0, u), masked);
    vfmadd231ps(F, I, G);
    if (desc_.clip_bits) clamp_to_clip(F);
    store(at(c_out_, 0, u), F, masked);
    if (peephole) accumulate_product(O, F, at(peephole_, 2, u), masked);
  }
  if (peephole) {
    clamp_gates(slots(count, o));
    activate(ActivationRole::f, Activation::sigmoid, slots(count, o));
    if (desc_.training)
      for (int u = 0; u < count; ++u) store(at(gates_, o, u), slot(u, o), masked);
  }
  activate(ActivationRole::h, Activation::tanh, slots(count, f));
  for (int u = 0; u < count; ++u) {
    vmulps(slot(u, o), slot(u, o), slot(u, f));
    store(at(h_out_, 0, u), slot(u, o), masked);
  }
}

LstmBackward::LstmBackward(const KernelDesc& desc) : GateEmitter(desc, 8) {
  row_pointer(dy_, offsetof(GateBackwardArgs, dy), dy_row_bytes(), 1);
  row_pointer(c_, offsetof(GateBackwardArgs, c), hidden_bytes(), 1);
  row_pointer(c_prev_, offsetof(GateBackwardArgs, c_prev), hidden_bytes(), 1);
  row_pointer(gates_, offsetof(GateBackwardArgs, gates), 4 * hidden_bytes(), 4);
  row_pointer(dh_carry_, offsetof(GateBackwardArgs, dh_carry), hidden_bytes());
  row_pointer(dc_carry_, offsetof(GateBackwardArgs, dc_carry), hidden_bytes());
  if (desc.peephole) row_pointer(peephole_, offsetof(GateBackwardArgs, peephole), 0);
  generate();
}

void LstmBackward::body(int count, bool masked) {
  for (int u = 0; u < count; ++u) {
    load(slot(u, dh), at(dy_, 0, u), masked);
    accumulate(slot(u, dh), at(dh_carry_, 0, u), masked);
    load(slot(u, tc), at(c_, 0, u), masked);
  }
  act_.tanh(slots(count, tc));
  for (int u = 0; u < count; ++u) {
    output_and_cell_gradients(u, masked);
    input_and_candidate_gradients(u, masked);
    forget_gradient_and_carry(u, masked);
  }
}

void LstmBackward::output_and_cell_gradients(int u, bool masked) {
  auto R = [&](int k) { return slot(u, k); };
  load(R(o), at(gates_, 3, u), masked);
  vmulps(R(t), R(dh), R(tc));                     // dh tanh(c)
  vmovaps(R(f), R(o));
  vfnmadd231ps(R(f), R(o), R(o));                 // o (1 - o)
  vmulps(R(t), R(t), R(f));                       // do
  zero_unless_passed(R(t), R(o), Activation::sigmoid);
  store(at(gates_, 3, u), R(t), masked);
  vmovaps(R(i), act_.one());
  vfnmadd231ps(R(i), R(tc), R(tc));               // 1 - tanh(c)^2
  vmulps(R(dh), R(dh), R(o));                     // dh o (dh is not needed after this)
  load(R(dc), at(dc_carry_, 0, u), masked);
  vfmadd231ps(R(dc), R(dh), R(i));                // dc += dh o (1 - tanh(c)^2)
  if (desc_.peephole) accumulate_product(R(dc), R(t), at(peephole_, 2, u), masked);  // dc += do P_o
  if (desc_.clip_bits) {                          // no gradient through a clamped c
    load(R(t), at(c_, 0, u), masked);
    zero_outside_clip(R(dc), R(t));
  }
}

void LstmBackward::input_and_candidate_gradients(int u, bool masked) {
  auto R = [&](int k) { return slot(u, k); };
  load(R(i), at(gates_, 0, u), masked);
  load(R(f), at(gates_, 1, u), masked);
  load(R(g), at(gates_, 2, u), masked);
  if (desc_.input_forget) {                       // f = 1 - i: i also reaches c through -c_prev
    subtract(R(t), R(g), at(c_prev_, 0, u), masked);
    vmulps(R(t), R(t), R(dc));
  } else {
    vmulps(R(t), R(g), R(dc));
  }
  vmovaps(R(tc), R(i));
  vfnmadd231ps(R(tc), R(i), R(i));                // i (1 - i)
  vmulps(R(t), R(t), R(tc));                      // di = dc (g [- c_prev]) i (1 - i)
  zero_unless_passed(R(t), R(i), Activation::sigmoid);
  store(at(gates_, 0, u), R(t), masked);
  if (desc_.peephole) {                           // dh (free) gathers di P_i + df P_f for dc_{t-1}
    multiply(R(dh), R(t), at(peephole_, 0, u), masked);
  }
  vmovaps(R(tc), act_.one());
  vfnmadd231ps(R(tc), R(g), R(g));                // 1 - g^2
  vmulps(R(tc), R(tc), R(i));
  vmulps(R(tc), R(tc), R(dc));                    // dg = dc i (1 - g^2)
  zero_unless_passed(R(tc), R(g), Activation::tanh);
  store(at(gates_, 2, u), R(tc), masked);
}

void LstmBackward::forget_gradient_and_carry(int u, bool masked) {
  auto R = [&](int k) { return slot(u, k); };
  if (desc_.input_forget) {
    vxorps(R(t), R(t), R(t));                     // f has no pre-activation: no gradient
  } else {
    vmovaps(R(t), R(f));
    vfnmadd231ps(R(t), R(f), R(f));               // f (1 - f)
    vmulps(R(t), R(t), R(dc));
    multiply(R(t), R(t), at(c_prev_, 0, u), masked);  // df = dc c_prev f (1 - f)
    zero_unless_passed(R(t), R(f), Activation::sigmoid);
    if (desc_.peephole) accumulate_product(R(dh), R(t), at(peephole_, 1, u), masked);
  }
  store(at(gates_, 1, u), R(t), masked);
  vmulps(R(dc), R(dc), R(f));                     // dc_{t-1} = dc f
  if (desc_.peephole) vaddps(R(dc), R(dc), R(dh));  //   + di P_i + df P_f
  store(at(dc_carry_, 0, u), R(dc), masked);
}

}  // namespace rnnjit::x64
