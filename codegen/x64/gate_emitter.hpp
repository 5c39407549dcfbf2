// rnnjit: the skeleton shared by every AVX-512 gate kernel: argument loading, the loop over
// batch rows, the loop over column blocks of `unroll` vectors, the remainder vectors, and the
// opmask tail (H not a multiple of 16), so that no lane past H is ever read or written.
//
// Register map (declared, never wrapped around):
//   zmm0..15   per-slot registers: slot u (0..unroll-1), value i -> zmm(u * regs_per_slot + i)
//   zmm16..27  activation scratch (gate_activation_registers())
//   zmm28..31  activation constants
//   k1 tail mask; k2..k4 and k6 activation masks; k5 emitter-local
//   rcx column byte offset, rax column-block counter, rsi row counter
//   [rsp, rsp+16) backward kernels with a gate clip: the activations of the clip's bounds
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "codegen/kernel_desc.hpp"
#include "codegen/register_budgets.hpp"
#include "codegen/x64/activations.hpp"
#include "codegen/x64/jit_generator.hpp"

namespace rnnjit::x64 {

class GateEmitter : public JitGenerator {
 public:
  const KernelDesc& desc() const { return desc_; }
  std::size_t text_size() const override { return text_size_; }  // instructions before the constants

 protected:
  static constexpr int kSlotRegisters = kGateSlotRegisters;
  static constexpr int kVector = 16;  // floats per zmm

  // Refuses (throws Error) a descriptor whose unroll * regs_per_slot exceeds the slot registers.
  GateEmitter(const KernelDesc& desc, int regs_per_slot);

  // Emits the whole kernel; derived constructors call it after declaring their row pointers.
  void generate();

  // A pointer the kernel walks: loaded from the argument struct at byte `offset` on entry and
  // moved on by `row_bytes` after each batch row (0 for one shared by every row, as biases are).
  // `streamed_blocks` > 0: the rows stream from beyond L2 (a time step's slice of a T-long
  // buffer), so the kernel prefetches the first `streamed_blocks` H-wide blocks of a row ahead.
  void row_pointer(const Xbyak::Reg64& reg, std::size_t offset, std::int64_t row_bytes, int streamed_blocks = 0);
  virtual void body(int count, bool masked) = 0;  // `count` consecutive vectors at column rcx

  Xbyak::Zmm slot(int u, int i) const;
  std::vector<Xbyak::Zmm> slots(int count, int i) const;  // value i of slots 0..count-1
  // Vector u of gate `gate` of the row that `base` points at, at the current column block.
  Xbyak::Address at(const Xbyak::Reg64& base, int gate, int u) const;
  void load(const Xbyak::Zmm& dst, const Xbyak::Address& src, bool masked);
  void accumulate(const Xbyak::Zmm& dst, const Xbyak::Address& src, bool masked);  // dst += src
  void accumulate_product(const Xbyak::Zmm& dst, const Xbyak::Zmm& a, const Xbyak::Address& b,
                          bool masked);  // dst += a * b
  void store(const Xbyak::Address& dst, const Xbyak::Zmm& src, bool masked);

  std::int64_t hidden_bytes() const { return std::int64_t{desc_.hidden} * 4; }  // a row of c, dh_carry
  std::int64_t h_row_bytes() const { return std::int64_t{desc_.ld_h} * 4; }     // a row of h
  std::int64_t dy_row_bytes() const { return desc_.dy_stride() * 4; }          // a row of dy

  // LSTM cell clip (desc_.clip_bits != 0): v = min(max(v, -clip), clip), NaN kept; and
  // k = (-clip < c < clip) for the backward pass. Both use clip_scratch_ for the bound.
  void clamp_to_clip(const Xbyak::Zmm& v);
  void inside_clip(const Xbyak::Opmask& k, const Xbyak::Zmm& c);

  // ONNX's gate clip (desc_.gate_clip_bits != 0; each a no-op without one). Forward: every
  // pre-activation in v clamped to [-gate_clip, gate_clip], NaN kept. Backward: grad zeroed
  // where the gate's activation a shows its pre-activation was clamped, i.e. a is not strictly
  // between the activations of the two bounds. Those are computed once at kernel entry by the
  // same activation code as the forward kernel's, so a clamped gate matches its bound exactly.
  enum class Activation { sigmoid, tanh, relu };
  void clamp_gates(std::span<const Xbyak::Zmm> v);
  void zero_unless_passed(const Xbyak::Zmm& grad, const Xbyak::Zmm& a, Activation act);
  // rnn_relu with desc_.relu_alpha_bits: the leaky slope as a broadcast {1to16} operand.
  Xbyak::Address relu_alpha();

  KernelDesc desc_;
  std::size_t text_size_ = 0;
  int regs_per_slot_;
  Activations act_;
  const Xbyak::Reg64 col_ = rcx, block_counter_ = rax, row_counter_ = rsi;
  const Xbyak::Opmask tail_mask_ = k1, local_mask_ = k5;
  const Xbyak::Zmm clip_scratch_ = Xbyak::Zmm(26);  // an activation scratch, free between fragments

 private:
  struct RowPointer {
    Xbyak::Reg64 reg;
    std::size_t offset;
    std::int64_t row_bytes;
    int streamed_blocks;
  };
  std::vector<RowPointer> row_pointers_;
  void prefetch_streamed(int count);  // the streamed rows' lines of `count` vectors at column rcx, rows ahead
  Xbyak::Address clip_bound(bool negative);
  Xbyak::Address gate_clip_bound(bool negative);
  void store_gate_clip_bounds();  // backward prologue: the activations of +-gate_clip, to [rsp]
  Xbyak::Label clip_table_;
  static constexpr int kGateBoundsBytes = 16;  // sigmoid(-b), sigmoid(b), tanh(-b), tanh(b)
};

// The emitter for a descriptor, finalized (read+execute). Throws Error if the descriptor is
// not an AVX-512 gate kernel this generator can emit.
std::unique_ptr<GateEmitter> emit_gate_kernel(const KernelDesc& desc);

// The activation fragments' registers in a gate kernel (the map above). Twelve scratch
// registers and four masks give a sigmoid six chains at once and a tanh four, so that an LSTM
// block's four tanh(g) and four tanh(c) each run as one group of chains, not three and a lone
// one (with eleven and three masks): the DS2 LSTM's forward gate kernel on a thread's 400
// units, its data in cache, 14.4-14.9 -> 14.0 us (GRU's within the noise).
ActivationRegisters gate_activation_registers();

}  // namespace rnnjit::x64
