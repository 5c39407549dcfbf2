// rnnjit: GRU gate kernels, linear-before-reset form (PyTorch, cuDNN), gate order r, z, n.
//   forward:  r,z = sigmoid(gx + b_ih + gh + b_hh); hn = gh_n + b_hn; n = tanh(gx_n + b_in + r hn);
//             h = n + z (h_prev - n). Training stores r, z, hn, n. A gate clip clamps the
//             arguments of the sigmoids and of the tanh. ONNX's activations (inference): the
//             descriptor's role f for r, z and g for n.
//   backward: dn = dh (1 - z)(1 - n^2); writes dr, dz, dn r (recurrent side of n), dn (input
//             side) over r, z, hn, n, and the direct term dh z into dh_carry.
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

GruForward::GruForward(const KernelDesc& desc) : ForwardGateEmitter(desc, 4) {
  row_pointer(h_prev_, offsetof(GateForwardArgs, h_prev), h_row_bytes());
  row_pointer(h_out_, offsetof(GateForwardArgs, h_out), h_row_bytes());
  if (desc.training) row_pointer(gates_, offsetof(GateForwardArgs, gates), 4 * hidden_bytes());
  generate();
}

void GruForward::body(int count, bool masked) {
  enum { r, z, n, hn };
  for (int u = 0; u < count; ++u) {
    for (int g : {r, z}) {
      load(slot(u, g), at(gx_, g, u), masked);
      accumulate(slot(u, g), at(gh_, g, u), masked);
      accumulate(slot(u, g), at(bias_ih_, g, u), masked);
      accumulate(slot(u, g), at(bias_hh_, g, u), masked);
    }
    load(slot(u, n), at(gx_, 2, u), masked);
    accumulate(slot(u, n), at(bias_ih_, 2, u), masked);
    load(slot(u, hn), at(gh_, 2, u), masked);
    accumulate(slot(u, hn), at(bias_hh_, 2, u), masked);
  }
  std::vector<Xbyak::Xmm> sig = slots(count, r);
  for (const Xbyak::Xmm& v : slots(count, z)) sig.push_back(v);
  clamp_gates(sig);
  activate(ActivationRole::f, Activation::sigmoid, sig);
  for (int u = 0; u < count; ++u) {
    vfmadd231ps(slot(u, n), slot(u, r), slot(u, hn));
    if (desc_.training) {
      store(at(gates_, 0, u), slot(u, r), masked);
      store(at(gates_, 1, u), slot(u, z), masked);
      store(at(gates_, 2, u), slot(u, hn), masked);
    }
  }
  clamp_gates(slots(count, n));
  activate(ActivationRole::g, Activation::tanh, slots(count, n));
  for (int u = 0; u < count; ++u) {
    if (desc_.training) store(at(gates_, 3, u), slot(u, n), masked);
    load(slot(u, hn), at(h_prev_, 0, u), masked);
    vsubps(slot(u, hn), slot(u, hn), slot(u, n));
    vfmadd231ps(slot(u, n), slot(u, z), slot(u, hn));  // h = n + z (h_prev - n)
    store(at(h_out_, 0, u), slot(u, n), masked);
  }
}

GruBackward::GruBackward(const KernelDesc& desc) : GateEmitter(desc, 8) {
  row_pointer(dy_, offsetof(GateBackwardArgs, dy), dy_row_bytes(), 1);
  row_pointer(h_prev_, offsetof(GateBackwardArgs, h_prev), h_row_bytes(), 1);
  row_pointer(gates_, offsetof(GateBackwardArgs, gates), 4 * hidden_bytes(), 4);
  row_pointer(dh_carry_, offsetof(GateBackwardArgs, dh_carry), hidden_bytes());
  generate();
}

void GruBackward::body(int count, bool masked) {
  enum { dh, r, z, hn, n, t, s };
  const Xbyak::Xmm one = act_.one();
  for (int u = 0; u < count; ++u) {
    auto R = [&](int k) { return slot(u, k); };
    load(R(dh), at(dy_, 0, u), masked);
    accumulate(R(dh), at(dh_carry_, 0, u), masked);
    load(R(r), at(gates_, 0, u), masked);
    load(R(z), at(gates_, 1, u), masked);
    load(R(hn), at(gates_, 2, u), masked);
    load(R(n), at(gates_, 3, u), masked);
    vmulps(R(t), R(dh), R(z));
    store(at(dh_carry_, 0, u), R(t), masked);     // direct term dh z
    vsubps(R(s), R(dh), R(t));                    // dh (1 - z)
    vmovaps(R(t), one);
    vfnmadd231ps(R(t), R(n), R(n));
    vmulps(R(s), R(s), R(t));                     // dn = dh (1 - z)(1 - n^2)
    zero_unless_passed(R(s), R(n), Activation::tanh);
    store(at(gates_, 3, u), R(s), masked);
    vmulps(R(t), R(s), R(r));
    store(at(gates_, 2, u), R(t), masked);        // dn r
    vmovaps(R(t), R(r));
    vfnmadd231ps(R(t), R(r), R(r));               // r (1 - r)
    vmulps(R(t), R(t), R(hn));
    vmulps(R(t), R(t), R(s));
    zero_unless_passed(R(t), R(r), Activation::sigmoid);
    store(at(gates_, 0, u), R(t), masked);        // dr = dn hn r (1 - r)
    load(R(t), at(h_prev_, 0, u), masked);
    vsubps(R(t), R(t), R(n));
    vmulps(R(t), R(t), R(dh));
    vmovaps(R(r), R(z));
    vfnmadd231ps(R(r), R(z), R(z));               // z (1 - z)
    vmulps(R(t), R(t), R(r));
    zero_unless_passed(R(t), R(z), Activation::sigmoid);
    store(at(gates_, 1, u), R(t), masked);        // dz = dh (h_prev - n) z (1 - z)
  }
}

}  // namespace rnnjit::x64
