// rnnjit: GRU gate kernels with the reset before the recurrent product (ONNX's default GRU,
// linear_before_reset = 0; oneDNN's "vanilla GRU"), gate order r, z, n, forward (inference) only.
// n's recurrent GEMM reads r * h_prev, so a step is two kernels around that GEMM:
//   part 0 (GruResetGates):     r,z = sigmoid(gx + b_ih + gh + b_hh); h_out = r * h_prev; c_out = z
//   part 1 (GruResetCandidate): n = tanh(gx_n + b_in + gh_n + b_hn), gh_n = W_hn (r * h_prev);
//                               h = n + z (h_prev - n) with z from c_prev
// z travels through the c_out/c_prev pointers ([N, H], unused by a GRU otherwise).
#include <cstddef>

#include "codegen/kernel_args.hpp"
#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

GruResetGates::GruResetGates(const KernelDesc& desc) : GateEmitter(desc, 3) { generate(); }

void GruResetGates::load_pointers() {
  mov(gx_, ptr[abi_arg + offsetof(GateForwardArgs, gx)]);
  mov(gh_, ptr[abi_arg + offsetof(GateForwardArgs, gh)]);
  mov(bias_ih_, ptr[abi_arg + offsetof(GateForwardArgs, bias_ih)]);
  mov(bias_hh_, ptr[abi_arg + offsetof(GateForwardArgs, bias_hh)]);
  mov(h_prev_, ptr[abi_arg + offsetof(GateForwardArgs, h_prev)]);
  mov(reset_h_, ptr[abi_arg + offsetof(GateForwardArgs, h_out)]);
  mov(z_, ptr[abi_arg + offsetof(GateForwardArgs, c_out)]);
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
  std::vector<Xbyak::Zmm> sig = slots(count, r);
  for (const Xbyak::Zmm& v : slots(count, z)) sig.push_back(v);
  clamp_gates(sig);
  act_.sigmoid(sig);
  for (int u = 0; u < count; ++u) {
    store(at(z_, 0, u), slot(u, z), masked);
    load(slot(u, h), at(h_prev_, 0, u), masked);
    vmulps(slot(u, h), slot(u, h), slot(u, r));  // r * h_prev
    store(at(reset_h_, 0, u), slot(u, h), masked);
  }
}

void GruResetGates::advance_rows() {
  add(gx_, 3 * static_cast<int>(hidden_bytes()));
  add(gh_, 3 * static_cast<int>(hidden_bytes()));
  add(h_prev_, static_cast<int>(desc_.ld_h * 4));
  add(reset_h_, static_cast<int>(desc_.ld_h * 4));
  add(z_, static_cast<int>(hidden_bytes()));
}

GruResetCandidate::GruResetCandidate(const KernelDesc& desc) : GateEmitter(desc, 3) { generate(); }

void GruResetCandidate::load_pointers() {
  mov(gx_, ptr[abi_arg + offsetof(GateForwardArgs, gx)]);
  mov(gh_, ptr[abi_arg + offsetof(GateForwardArgs, gh)]);
  mov(bias_ih_, ptr[abi_arg + offsetof(GateForwardArgs, bias_ih)]);
  mov(bias_hh_, ptr[abi_arg + offsetof(GateForwardArgs, bias_hh)]);
  mov(h_prev_, ptr[abi_arg + offsetof(GateForwardArgs, h_prev)]);
  mov(h_out_, ptr[abi_arg + offsetof(GateForwardArgs, h_out)]);
  mov(z_, ptr[abi_arg + offsetof(GateForwardArgs, c_prev)]);
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
  act_.tanh(slots(count, n));
  for (int u = 0; u < count; ++u) {
    load(slot(u, z), at(z_, 0, u), masked);
    load(slot(u, t), at(h_prev_, 0, u), masked);
    vsubps(slot(u, t), slot(u, t), slot(u, n));
    vfmadd231ps(slot(u, n), slot(u, z), slot(u, t));  // h = n + z (h_prev - n)
    store(at(h_out_, 0, u), slot(u, n), masked);
  }
}

void GruResetCandidate::advance_rows() {
  add(gx_, 3 * static_cast<int>(hidden_bytes()));
  add(gh_, 3 * static_cast<int>(hidden_bytes()));
  add(h_prev_, static_cast<int>(desc_.ld_h * 4));
  add(h_out_, static_cast<int>(desc_.ld_h * 4));
  add(z_, static_cast<int>(hidden_bytes()));
}

}  // namespace rnnjit::x64
