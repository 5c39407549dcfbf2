// rnnjit: one emitter class per cell family and pass, AVX-512 or AVX2 as the descriptor says. Each follows its KernelDesc and
// the argument struct of its pass (codegen/kernel_args.hpp); the skeleton is GateEmitter's.
#pragma once

#include "codegen/x64/gate_emitter.hpp"

namespace rnnjit::x64 {

// Every forward kernel reads gx and gh (G*H floats a row) and the two biases (shared by every
// row), from the same argument fields into the same registers; the constructor declares them,
// first, and the derived emitter its own pointers after.
class ForwardGateEmitter : public GateEmitter {
 protected:
  ForwardGateEmitter(const KernelDesc& desc, int regs_per_slot);
  const Xbyak::Reg64 gx_ = r8, gh_ = r9, bias_ih_ = r10, bias_hh_ = r11;
};

class LstmForward final : public ForwardGateEmitter {
 public:
  explicit LstmForward(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 c_prev_ = r12, h_out_ = r13, c_out_ = r14, gates_ = r15, peephole_ = rdx;
};

class LstmBackward final : public GateEmitter {
 public:
  explicit LstmBackward(const KernelDesc& desc);
 private:
  // What slot u holds, value v in slot(u, v).
  enum Value : int { dh, dc, tc, o, i, f, g, t };
  void body(int count, bool masked) override;
  void output_and_cell_gradients(int u, bool masked);  // do; dc, tanh(c) in tc
  void input_and_candidate_gradients(int u, bool masked);  // di, dg; with peepholes dh = di P_i
  void forget_gradient_and_carry(int u, bool masked);  // df; dc_carry
  const Xbyak::Reg64 dy_ = r8, c_ = r9, c_prev_ = r10, gates_ = r11, dh_carry_ = r12, dc_carry_ = r13,
                     peephole_ = r14;
};

class GruForward final : public ForwardGateEmitter {
 public:
  explicit GruForward(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 h_prev_ = r12, h_out_ = r13, gates_ = r14;
};

class GruBackward final : public GateEmitter {
 public:
  explicit GruBackward(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 dy_ = r8, h_prev_ = r9, gates_ = r10, dh_carry_ = r11;
};

// GRU with the reset before the recurrent product (ONNX's linear_before_reset = 0), as two
// kernels per step each way (desc.part). Forward: the r,z kernel writes r * h_prev and z, then,
// after the GEMM of n's columns on r * h_prev, the n kernel writes h (training: both also store
// their gates). Backward: dz, dn and dh z, then, after the GEMM d(r * h_prev) = dn W_hn, dr and
// the reset gate's share of dh_{t-1}.
class GruResetGates final : public ForwardGateEmitter {
 public:
  explicit GruResetGates(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 h_prev_ = r12, reset_h_ = r13, z_ = r14, gates_ = r15;
};

class GruResetCandidate final : public ForwardGateEmitter {
 public:
  explicit GruResetCandidate(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 h_prev_ = r12, h_out_ = r13, z_ = r14, gates_ = r15;
};

class GruResetBackwardUpdate final : public GateEmitter {
 public:
  explicit GruResetBackwardUpdate(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 dy_ = r8, h_prev_ = r9, gates_ = r10, dh_carry_ = r11;
};

class GruResetBackwardReset final : public GateEmitter {
 public:
  explicit GruResetBackwardReset(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 d_reset_h_ = r8, h_prev_ = r9, gates_ = r10, dh_carry_ = r11;
};

// Vanilla RNN, tanh or relu as the descriptor's cell says.
class RnnForward final : public ForwardGateEmitter {
 public:
  explicit RnnForward(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 h_out_ = r12;
};

class RnnBackward final : public GateEmitter {
 public:
  explicit RnnBackward(const KernelDesc& desc);
 private:
  void body(int count, bool masked) override;
  const Xbyak::Reg64 dy_ = r8, h_ = r9, gates_ = r10, dh_carry_ = r11;
};

}  // namespace rnnjit::x64
