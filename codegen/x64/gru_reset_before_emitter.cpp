// rnnjit: GRU gate kernels with the reset before the recurrent product (ONNX's default GRU,
// linear_before_reset = 0; oneDNN's "vanilla GRU"), gate order r, z, n. n's recurrent GEMM
// reads r * h_prev, so a step is two kernels around a GEMM each way:
//   forward part 0 (GruResetGates):     r,z = sigmoid(gx + b_ih + gh + b_hh); h_out = r * h_prev;
//                                       c_out = z; training stores r, z
//   forward part 1 (GruResetCandidate): n = tanh(gx_n + b_in + gh_n + b_hn), gh_n = W_hn (r * h_prev);
//                                       h = n + z (h_prev - n) with z from c_prev; training stores n
//   backward part 0 (GruResetBackwardUpdate): dh = dy + dh_carry; dz = dh (h_prev - n) z (1 - z),
//                                       dn = dh (1 - z)(1 - n^2) over z, n; dh_carry = dh z
//   backward part 1 (GruResetBackwardReset): with d = d(r * h_prev) = dn W_hn: dr = d h_prev r (1 - r)
//                                       over r; dh_carry += d r
// z travels through the c_out/c_prev pointers ([N, H], unused by a GRU otherwise). A gate clip
// clamps the activations' arguments and stops the gradients where it held. ONNX's activations
// (inference): the descriptor's role f for r, z in part 0, g for n in part 1.
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

GruResetGates::GruResetGates(const KernelDesc& desc) : ForwardGateEmitter(desc, 3) {
  row_pointer(h_prev_, offsetof(GateForwardArgs, h_prev), h_row_bytes());
  row_pointer(reset_h_, offsetof(GateForwardArgs, h_out), h_row_bytes());
  row_pointer(z_, offsetof(GateForwardArgs, c_out), hidden_bytes());
  if (desc.training) row_pointer(gates_, offsetof(GateForwardArgs, gates), 3 * hidden_bytes());
  generate();
}

void GruResetGates::body(int count, bool masked) {
  enum { r, z, h };
  for (int u = 0; u < count; ++u)
    for (int g : {r, z}) {
      load(slot(u, g), at(gx_, g, u), masked);
      accumulate(slot(u, g), at(gh_, g, u), masked);
      accumulate(slot(u, g), at(bias_ih_, g, u), masked);
      accumulate(slot(u, g), at(bias_hh_, g, u), masked);
    }
  std::vector<Xbyak::Xmm> sig = slots(count, r);
  for (const Xbyak::Xmm& v : slots(count, z)) sig.push_back(v);
  clamp_gates(sig);
  activate(ActivationRole::f, Activation::sigmoid, sig);
  for (int u = 0; u < count; ++u) {
    store(at(z_, 0, u), slot(u, z), masked);
    if (desc_.training) {
      store(at(gates_, 0, u), slot(u, r), masked);
      store(at(gates_, 1, u), slot(u, z), masked);
    }
    load(slot(u, h), at(h_prev_, 0, u), masked);
    vmulps(slot(u, h), slot(u, h), slot(u, r));  // r * h_prev
    store(at(reset_h_, 0, u), slot(u, h), masked);
  }
}

GruResetCandidate::GruResetCandidate(const KernelDesc& desc) : ForwardGateEmitter(desc, 3) {
  row_pointer(h_prev_, offsetof(GateForwardArgs, h_prev), h_row_bytes());
  row_pointer(h_out_, offsetof(GateForwardArgs, h_out), h_row_bytes());
  row_pointer(z_, offsetof(GateForwardArgs, c_prev), hidden_bytes());
  if (desc.training) row_pointer(gates_, offsetof(GateForwardArgs, gates), 3 * hidden_bytes());
  generate();
}

void GruResetCandidate::body(int count, bool masked) {
  enum { n, z, t };
  for (int u = 0; u < count; ++u) {
    load(slot(u, n), at(gx_, 2, u), masked);
    accumulate(slot(u, n), at(gh_, 2, u), masked);
    accumulate(slot(u, n), at(bias_ih_, 2, u), masked);
    accumulate(slot(u, n), at(bias_hh_, 2, u), masked);
  }
  clamp_gates(slots(count, n));
  activate(ActivationRole::g, Activation::tanh, slots(count, n));
  for (int u = 0; u < count; ++u) {
    if (desc_.training) store(at(gates_, 2, u), slot(u, n), masked);
    load(slot(u, z), at(z_, 0, u), masked);
    load(slot(u, t), at(h_prev_, 0, u), masked);
    vsubps(slot(u, t), slot(u, t), slot(u, n));
    vfmadd231ps(slot(u, n), slot(u, z), slot(u, t));  // h = n + z (h_prev - n)
    store(at(h_out_, 0, u), slot(u, n), masked);
  }
}

GruResetBackwardUpdate::GruResetBackwardUpdate(const KernelDesc& desc) : GateEmitter(desc, 5) {
  row_pointer(dy_, offsetof(GateBackwardArgs, dy), dy_row_bytes(), 1);
  row_pointer(h_prev_, offsetof(GateBackwardArgs, h_prev), h_row_bytes(), 1);
  row_pointer(gates_, offsetof(GateBackwardArgs, gates), 3 * hidden_bytes(), 3);
  row_pointer(dh_carry_, offsetof(GateBackwardArgs, dh_carry), hidden_bytes());
  generate();
}

void GruResetBackwardUpdate::body(int count, bool masked) {
  enum { dh, z, n, t, s };
  for (int u = 0; u < count; ++u) {
    auto R = [&](int k) { return slot(u, k); };
    load(R(dh), at(dy_, 0, u), masked);
    accumulate(R(dh), at(dh_carry_, 0, u), masked);
    load(R(z), at(gates_, 1, u), masked);
    load(R(n), at(gates_, 2, u), masked);
    vmulps(R(t), R(dh), R(z));
    store(at(dh_carry_, 0, u), R(t), masked);     // direct term dh z
    vsubps(R(s), R(dh), R(t));                    // dh (1 - z)
    vmovaps(R(t), act_.one());
    vfnmadd231ps(R(t), R(n), R(n));
    vmulps(R(s), R(s), R(t));                     // dn = dh (1 - z)(1 - n^2)
    zero_unless_passed(R(s), R(n), Activation::tanh);
    store(at(gates_, 2, u), R(s), masked);
    load(R(t), at(h_prev_, 0, u), masked);
    vsubps(R(t), R(t), R(n));
    vmulps(R(t), R(t), R(dh));
    vmovaps(R(s), R(z));
    vfnmadd231ps(R(s), R(z), R(z));               // z (1 - z)
    vmulps(R(t), R(t), R(s));                     // dz = dh (h_prev - n) z (1 - z)
    zero_unless_passed(R(t), R(z), Activation::sigmoid);
    store(at(gates_, 1, u), R(t), masked);
  }
}

GruResetBackwardReset::GruResetBackwardReset(const KernelDesc& desc) : GateEmitter(desc, 4) {
  row_pointer(d_reset_h_, offsetof(GateBackwardArgs, d_reset_h), hidden_bytes());
  row_pointer(h_prev_, offsetof(GateBackwardArgs, h_prev), h_row_bytes(), 1);
  row_pointer(gates_, offsetof(GateBackwardArgs, gates), 3 * hidden_bytes(), 3);
  row_pointer(dh_carry_, offsetof(GateBackwardArgs, dh_carry), hidden_bytes());
  generate();
}

void GruResetBackwardReset::body(int count, bool masked) {
  enum { d, r, t, s };
  for (int u = 0; u < count; ++u) {
    auto R = [&](int k) { return slot(u, k); };
    load(R(d), at(d_reset_h_, 0, u), masked);
    load(R(r), at(gates_, 0, u), masked);
    load(R(s), at(dh_carry_, 0, u), masked);
    vfmadd231ps(R(s), R(d), R(r));                // dh_carry += d r
    store(at(dh_carry_, 0, u), R(s), masked);
    vmovaps(R(t), R(r));
    vfnmadd231ps(R(t), R(r), R(r));               // r (1 - r)
    vmulps(R(t), R(t), R(d));
    multiply(R(t), R(t), at(h_prev_, 0, u), masked);  // dr = d h_prev r (1 - r)
    zero_unless_passed(R(t), R(r), Activation::sigmoid);
    store(at(gates_, 0, u), R(t), masked);
  }
}

}  // namespace rnnjit::x64
