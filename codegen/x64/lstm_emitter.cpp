// rnnjit: LSTM gate kernels (PyTorch gate order i, f, g, o).
//   forward:  i,f,o = sigmoid, g = tanh of (gx + b_ih + gh + b_hh); c = f c_prev + i g (clamped to
//             [-clip, clip] with a cell clip); h = o tanh(c)
//   backward: from the stored i,f,g,o and c_t, c_{t-1}: dc = dc_carry + dh o (1 - tanh(c)^2) (zero
//             where the clip held c at a bound), the pre-activation gradients written over the
//             gates, and dc_carry = dc f.
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

LstmForward::LstmForward(const KernelDesc& desc) : GateEmitter(desc, 4) { generate(); }

void LstmForward::load_pointers() {
  mov(gx_, ptr[abi_arg + offsetof(GateForwardArgs, gx)]);
  mov(gh_, ptr[abi_arg + offsetof(GateForwardArgs, gh)]);
  mov(bias_ih_, ptr[abi_arg + offsetof(GateForwardArgs, bias_ih)]);
  mov(bias_hh_, ptr[abi_arg + offsetof(GateForwardArgs, bias_hh)]);
  mov(c_prev_, ptr[abi_arg + offsetof(GateForwardArgs, c_prev)]);
  mov(h_out_, ptr[abi_arg + offsetof(GateForwardArgs, h_out)]);
  mov(c_out_, ptr[abi_arg + offsetof(GateForwardArgs, c_out)]);
  if (desc_.training) mov(gates_, ptr[abi_arg + offsetof(GateForwardArgs, gates)]);
}

void LstmForward::body(int count, bool masked) {
  for (int u = 0; u < count; ++u)
    for (int g = 0; g < 4; ++g) {
      load(slot(u, g), at(gx_, g, u), masked);
      accumulate(slot(u, g), at(gh_, g, u), masked);
      accumulate(slot(u, g), at(bias_ih_, g, u), masked);
      accumulate(slot(u, g), at(bias_hh_, g, u), masked);
    }
  std::vector<Xbyak::Zmm> sig;
  for (int g : {0, 1, 3})
    for (const Xbyak::Zmm& z : slots(count, g)) sig.push_back(z);
  act_.sigmoid(sig);
  act_.tanh(slots(count, 2));
  for (int u = 0; u < count; ++u) {
    const Xbyak::Zmm i = slot(u, 0), f = slot(u, 1), g = slot(u, 2);
    if (desc_.training)
      for (int k = 0; k < 4; ++k) store(at(gates_, k, u), slot(u, k), masked);
    // c = f * c_prev + i * g, in f's register.
    if (masked) vmulps(f | tail_mask_ | T_z, f, at(c_prev_, 0, u));
    else vmulps(f, f, at(c_prev_, 0, u));
    vfmadd231ps(f, i, g);
    if (desc_.clip_bits) clamp_to_clip(f);
    store(at(c_out_, 0, u), f, masked);
  }
  act_.tanh(slots(count, 1));
  for (int u = 0; u < count; ++u) {
    vmulps(slot(u, 3), slot(u, 3), slot(u, 1));
    store(at(h_out_, 0, u), slot(u, 3), masked);
  }
}

void LstmForward::advance_rows() {
  const int gate_row = 4 * static_cast<int>(hidden_bytes());
  add(gx_, gate_row);
  add(gh_, gate_row);
  add(c_prev_, static_cast<int>(hidden_bytes()));
  add(c_out_, static_cast<int>(hidden_bytes()));
  add(h_out_, static_cast<int>(desc_.ld_h * 4));
  if (desc_.training) add(gates_, gate_row);
}

LstmBackward::LstmBackward(const KernelDesc& desc) : GateEmitter(desc, 8) { generate(); }

void LstmBackward::load_pointers() {
  mov(dy_, ptr[abi_arg + offsetof(GateBackwardArgs, dy)]);
  mov(c_, ptr[abi_arg + offsetof(GateBackwardArgs, c)]);
  mov(c_prev_, ptr[abi_arg + offsetof(GateBackwardArgs, c_prev)]);
  mov(gates_, ptr[abi_arg + offsetof(GateBackwardArgs, gates)]);
  mov(dh_carry_, ptr[abi_arg + offsetof(GateBackwardArgs, dh_carry)]);
  mov(dc_carry_, ptr[abi_arg + offsetof(GateBackwardArgs, dc_carry)]);
}

void LstmBackward::body(int count, bool masked) {
  enum { dh, dc, tc, o, i, f, g, t };
  const Xbyak::Zmm one = act_.one();
  for (int u = 0; u < count; ++u) {
    load(slot(u, dh), at(dy_, 0, u), masked);
    accumulate(slot(u, dh), at(dh_carry_, 0, u), masked);
    load(slot(u, tc), at(c_, 0, u), masked);
  }
  act_.tanh(slots(count, tc));
  for (int u = 0; u < count; ++u) {
    auto R = [&](int k) { return slot(u, k); };
    load(R(o), at(gates_, 3, u), masked);
    vmulps(R(t), R(dh), R(o));                      // dh o
    vmovaps(R(i), one);
    vfnmadd231ps(R(i), R(tc), R(tc));               // 1 - tanh(c)^2
    load(R(dc), at(dc_carry_, 0, u), masked);
    vfmadd231ps(R(dc), R(t), R(i));                 // dc += dh o (1 - tanh(c)^2)
    if (desc_.clip_bits) {                          // no gradient through a clamped c
      load(R(t), at(c_, 0, u), masked);
      inside_clip(local_mask_, R(t));
      vmovaps(R(dc) | local_mask_ | T_z, R(dc));
    }
    vmulps(R(t), R(dh), R(tc));                     // do = dh tanh(c)
    vmovaps(R(f), R(o));
    vfnmadd231ps(R(f), R(o), R(o));                 // o (1 - o)
    vmulps(R(t), R(t), R(f));
    store(at(gates_, 3, u), R(t), masked);
    load(R(i), at(gates_, 0, u), masked);
    load(R(f), at(gates_, 1, u), masked);
    load(R(g), at(gates_, 2, u), masked);
    vmovaps(R(t), R(i));
    vfnmadd231ps(R(t), R(i), R(i));                 // i (1 - i)
    vmulps(R(t), R(t), R(g));
    vmulps(R(t), R(t), R(dc));                      // di = dc g i (1 - i)
    store(at(gates_, 0, u), R(t), masked);
    vmovaps(R(tc), one);
    vfnmadd231ps(R(tc), R(g), R(g));                // 1 - g^2
    vmulps(R(tc), R(tc), R(i));
    vmulps(R(tc), R(tc), R(dc));                    // dg = dc i (1 - g^2)
    store(at(gates_, 2, u), R(tc), masked);
    vmovaps(R(t), R(f));
    vfnmadd231ps(R(t), R(f), R(f));                 // f (1 - f)
    vmulps(R(t), R(t), R(dc));
    if (masked) vmulps(R(t) | tail_mask_ | T_z, R(t), at(c_prev_, 0, u));
    else vmulps(R(t), R(t), at(c_prev_, 0, u));     // df = dc c_prev f (1 - f)
    store(at(gates_, 1, u), R(t), masked);
    vmulps(R(dc), R(dc), R(f));                     // dc_{t-1} = dc f
    store(at(dc_carry_, 0, u), R(dc), masked);
  }
}

void LstmBackward::advance_rows() {
  add(dy_, static_cast<int>(desc_.ld_h * 4));
  add(c_, static_cast<int>(hidden_bytes()));
  add(c_prev_, static_cast<int>(hidden_bytes()));
  add(gates_, 4 * static_cast<int>(hidden_bytes()));
  add(dh_carry_, static_cast<int>(hidden_bytes()));
  add(dc_carry_, static_cast<int>(hidden_bytes()));
}

}  // namespace rnnjit::x64
