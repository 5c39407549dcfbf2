// rnnjit: the skeleton shared by every gate kernel, AVX-512 or AVX2 (the descriptor's isa,
// through VectorIsa): argument loading, the loop over batch rows, the loop over column blocks
// of `unroll` vectors, the remainder vectors, and the tail (cols not a multiple of the vector),
// so that no lane past cols is ever read or written.
//
// Register map (declared, never wrapped around):
//   AVX-512 (zmm, EVEX)                       AVX2 (ymm, VEX only)
//   zmm0..15   slots                          ymm0..7    slots
//   zmm16..27  activation scratch             ymm8..14   activation scratch (the bounds of
//   zmm28..31  activation constants                      exp and tanh broadcast into it)
//                                             ymm15      1.0
//   k1 tail mask; k2..k4, k6 activation       no k registers: the tail mask is a constant in
//   masks; k5 compares (LaneMask)             memory, loaded for vmaskmovps into the last
//                                             scratch, which also takes compares (LaneMask)
//   slot u (0..unroll-1), value i -> register u * regs_per_slot + i
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
#include "codegen/x64/vector_isa.hpp"

namespace rnnjit::x64 {

class GateEmitter : public JitGenerator {
 public:
  const KernelDesc& desc() const { return desc_; }
  std::size_t text_size() const override { return text_size_; }  // instructions before the constants

 protected:
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

  Xbyak::Xmm slot(int u, int i) const;
  std::vector<Xbyak::Xmm> slots(int count, int i) const;  // value i of slots 0..count-1
  // Activation scratch register i: free between the activation fragments (i < 5).
  Xbyak::Xmm scratch(int i) const { return isa_.vreg(gate_slot_registers(isa_.isa) + i); }
  // Vector u of gate `gate` of the row that `base` points at, at the current column block.
  Xbyak::Address at(const Xbyak::Reg64& base, int gate, int u) const;
  // Memory operands of the row's vectors; `masked`: the tail vector, whose lanes past cols are
  // neither read nor written (read as zero).
  void load(const Xbyak::Xmm& dst, const Xbyak::Address& src, bool masked);
  void accumulate(const Xbyak::Xmm& dst, const Xbyak::Address& src, bool masked);  // dst += src
  void accumulate_product(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b,
                          bool masked);  // dst += a * b
  void multiply(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b, bool masked);  // dst = a * b
  void subtract(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b, bool masked);  // dst = a - b
  void store(const Xbyak::Address& dst, const Xbyak::Xmm& src, bool masked);

  // Lanes selected by compares: k5 on AVX-512, the last scratch register's all-ones lanes on
  // AVX2. One at a time; `b` of and_compare must not be that register.
  struct LaneMask {
    Xbyak::Opmask k;
    Xbyak::Xmm v;
  };
  LaneMask compare(const Xbyak::Xmm& a, const Xbyak::Operand& b, int predicate);  // a predicate b
  void and_compare(const LaneMask& m, const Xbyak::Xmm& a, const Xbyak::Operand& b, int predicate);
  void zero_unless(const Xbyak::Xmm& v, const LaneMask& m);  // v = m ? v : 0
  void scale_by_alpha(const Xbyak::Xmm& v, const LaneMask& m);  // v = m ? relu_alpha v : v

  std::int64_t hidden_bytes() const { return std::int64_t{desc_.hidden} * 4; }  // a row of c, dh_carry
  std::int64_t h_row_bytes() const { return std::int64_t{desc_.ld_h} * 4; }     // a row of h
  std::int64_t dy_row_bytes() const { return desc_.dy_stride() * 4; }          // a row of dy

  // LSTM cell clip (desc_.clip_bits != 0): v = min(max(v, -clip), clip), NaN kept; and for the
  // backward pass v zeroed unless -clip < c < clip. Both use clip_scratch_ for the bound.
  void clamp_to_clip(const Xbyak::Xmm& v);
  void zero_outside_clip(const Xbyak::Xmm& v, const Xbyak::Xmm& c);

  // ONNX's gate clip (desc_.gate_clip_bits != 0; each a no-op without one). Forward: every
  // pre-activation in v clamped to [-gate_clip, gate_clip], NaN kept. Backward: grad zeroed
  // where the gate's activation a shows its pre-activation was clamped, i.e. a is not strictly
  // between the activations of the two bounds. Those are computed once at kernel entry by the
  // same activation code as the forward kernel's, so a clamped gate matches its bound exactly.
  enum class Activation { sigmoid, tanh, relu };
  void clamp_gates(std::span<const Xbyak::Xmm> v);
  // The function of ONNX's activation role `role` on v (forward, inference): the descriptor's
  // where it names one (KernelDesc::activation_of), else the cell's own, `own` (sigmoid or
  // tanh), whose code is unchanged.
  void activate(ActivationRole role, Activation own, std::span<const Xbyak::Xmm> v);
  void zero_unless_passed(const Xbyak::Xmm& grad, const Xbyak::Xmm& a, Activation act);

  KernelDesc desc_;
  VectorIsa isa_;
  std::size_t text_size_ = 0;
  int regs_per_slot_;
  Activations act_;
  const Xbyak::Reg64 col_ = rcx, block_counter_ = rax, row_counter_ = rsi;
  const Xbyak::Opmask tail_mask_ = k1, local_mask_ = k5;
  // Two activation scratch registers, free between fragments: the clip's bounds, and on AVX2
  // the tail's loads; the last, on AVX2, the tail mask and the compares.
  const Xbyak::Xmm clip_scratch_, mask_scratch_;

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
  Xbyak::Address relu_alpha();  // the leaky slope, a float (rnn_relu with relu_alpha_bits)
  Xbyak::Address relu_floor();  // relu_alpha * -gate_clip, as the forward kernel rounds it
  void store_gate_clip_bounds();  // backward prologue: the activations of +-gate_clip, to [rsp]
  // AVX2: the tail vector's operand from memory, through vmaskmovps into clip_scratch_.
  const Xbyak::Xmm& masked_operand(const Xbyak::Address& src);
  void load_tail_mask();  // AVX2: mask_scratch_ = the tail's lanes
  Xbyak::Label clip_table_, tail_table_;
  static constexpr int kGateBoundsBytes = 16;  // sigmoid(-b), sigmoid(b), tanh(-b), tanh(b)
};

// The emitter for a descriptor, finalized (read+execute). Throws Error if the descriptor is
// not an AVX-512 or AVX2 gate kernel this generator can emit.
std::unique_ptr<GateEmitter> emit_gate_kernel(const KernelDesc& desc);

// The activation fragments' registers in a gate kernel (the map above). AVX-512: twelve scratch
// registers and four masks give a sigmoid six chains at once and a tanh four, so that an LSTM
// block's four tanh(g) and four tanh(c) each run as one group of chains, not three and a lone
// one (with eleven and three masks): the DS2 LSTM's forward gate kernel on a thread's 400
// units, its data in cache, 14.4-14.9 -> 14.0 us (GRU's within the noise). AVX2: seven scratch
// registers (a sigmoid three chains, a tanh two) beside the eight slots and 1.0.
ActivationRegisters gate_activation_registers(Isa isa = Isa::avx512);

}  // namespace rnnjit::x64
