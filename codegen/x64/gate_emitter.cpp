#include "codegen/x64/gate_emitter.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
ActivationRegisters gate_activation_registers(Isa isa) {
  const VectorIsa v = vector_isa(isa);
  if (!v.opmask) {
    ActivationRegisters r{v.vreg(15), v.vreg(15), v.vreg(15), v.vreg(15), false, {}, {}};  // no bounds held
    for (int i = gate_slot_registers(isa); i <= 14; ++i) r.scratch.push_back(v.vreg(i));
    return r;
  }
  ActivationRegisters r{v.vreg(28), v.vreg(29), v.vreg(30), v.vreg(31), true, {},
                        {Xbyak::Opmask(2), Xbyak::Opmask(3), Xbyak::Opmask(4), Xbyak::Opmask(6)}};
  for (int i = gate_slot_registers(isa); i <= 27; ++i) r.scratch.push_back(v.vreg(i));
  return r;
}

GateEmitter::GateEmitter(const KernelDesc& desc, int regs_per_slot)
    : JitGenerator(),
      desc_(desc),
      isa_(vector_isa(desc.isa_kind())),
      regs_per_slot_(regs_per_slot),
      act_(*this, isa_, gate_activation_registers(desc.isa_kind())),
      clip_scratch_(gate_activation_registers(desc.isa_kind()).scratch.end()[-2]),
      mask_scratch_(gate_activation_registers(desc.isa_kind()).scratch.back()) {
  const int slot_registers = gate_slot_registers(desc.isa_kind());
  if (desc.unroll < 1 || static_cast<int>(desc.unroll) * regs_per_slot > slot_registers)
    throw Error(fmt::format("{}: unroll {} needs {} slot registers, only {} exist", kernel_name(desc), desc.unroll,
                            static_cast<int>(desc.unroll) * regs_per_slot, slot_registers));
  if (desc.kind_of() != KernelKind::gate) throw Error(fmt::format("{}: not a gate kernel", kernel_name(desc)));
  if (desc.hidden < 1 || desc.rows < 1 || desc.ld_h < desc.hidden || desc.dy_stride() < desc.hidden)
    throw Error(fmt::format("{}: needs hidden >= 1, rows >= 1 and ld_h, dy's row stride >= hidden", kernel_name(desc)));
  if (desc.clip_bits && (desc.cell_kind() != CellKind::lstm || !(desc.clip() > 0.0f)))
    throw Error(fmt::format("{}: clip needs an LSTM and a positive value", kernel_name(desc)));
  if (desc.gate_clip_bits && !(desc.gate_clip() > 0.0f && desc.gate_clip() < 1e30f))
    throw Error(fmt::format("{}: gate_clip must be a positive finite value", kernel_name(desc)));
  if (desc.relu_alpha_bits && !(desc.cell_kind() == CellKind::rnn_relu && desc.relu_alpha() > 0.0f &&
                                std::isfinite(desc.relu_alpha())))
    throw Error(fmt::format("{}: relu_alpha needs rnn_relu and a positive finite value", kernel_name(desc)));
  // ONNX's activations are generated for the forward inference kernels; backward (and the
  // training forward that feeds it) knows the derivatives of the cells' own functions only.
  if (desc.custom_activations()) {
    if (desc.pass_kind() != Pass::forward || desc.training)
      throw Error(fmt::format("{}: activations other than the cell's own are for inference only", kernel_name(desc)));
    for (int r = 0; r < kActivationRoles; ++r) {
      const ActivationFunction f = desc.activation_of(static_cast<ActivationRole>(r));
      if (static_cast<int>(f.kind) >= kActivationKinds || !std::isfinite(f.alpha) || !std::isfinite(f.beta))
        throw Error(fmt::format("{}: activation role {} is kind {} with alpha {} and beta {}: needs a known kind "
                                "and finite parameters",
                                kernel_name(desc), r, static_cast<int>(f.kind), f.alpha, f.beta));
    }
  }
  if ((desc.peephole || desc.input_forget) && desc.cell_kind() != CellKind::lstm)
    throw Error(fmt::format("{}: peephole and input_forget need an LSTM", kernel_name(desc)));
  if (desc.cols < 1 || desc.cols > desc.hidden)
    throw Error(fmt::format("{}: cols must be in [1, hidden = {}], got {}", kernel_name(desc), desc.hidden, desc.cols));
}

Xbyak::Xmm GateEmitter::slot(int u, int i) const { return isa_.vreg(u * regs_per_slot_ + i); }

std::vector<Xbyak::Xmm> GateEmitter::slots(int count, int i) const {
  std::vector<Xbyak::Xmm> r;
  for (int u = 0; u < count; ++u) r.push_back(slot(u, i));
  return r;
}

Xbyak::Address GateEmitter::at(const Xbyak::Reg64& base, int gate, int u) const {
  return ptr[base + col_ + static_cast<int>(gate * hidden_bytes() + u * isa_.vector_bytes())];
}

// AVX-512 masks the instruction itself (k1, lanes past the tail zeroed); AVX2 reads the tail
// through vmaskmovps (lanes past it read as zero) into a scratch register first.
void GateEmitter::load_tail_mask() { vmovups(mask_scratch_, ptr[rip + tail_table_]); }

const Xbyak::Xmm& GateEmitter::masked_operand(const Xbyak::Address& src) {
  load_tail_mask();
  vmaskmovps(clip_scratch_, mask_scratch_, src);
  return clip_scratch_;
}

void GateEmitter::load(const Xbyak::Xmm& dst, const Xbyak::Address& src, bool masked) {
  if (!masked) return vmovups(dst, src);
  if (isa_.opmask) return vmovups(dst | tail_mask_ | T_z, src);
  load_tail_mask();
  vmaskmovps(dst, mask_scratch_, src);
}

void GateEmitter::accumulate(const Xbyak::Xmm& dst, const Xbyak::Address& src, bool masked) {
  if (!masked) vaddps(dst, dst, src);
  else if (isa_.opmask) vaddps(dst | tail_mask_ | T_z, dst, src);
  else vaddps(dst, dst, masked_operand(src));
}

void GateEmitter::accumulate_product(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b,
                                     bool masked) {
  if (!masked) vfmadd231ps(dst, a, b);
  else if (isa_.opmask) vfmadd231ps(dst | tail_mask_ | T_z, a, b);
  else vfmadd231ps(dst, a, masked_operand(b));
}

void GateEmitter::multiply(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b, bool masked) {
  if (!masked) vmulps(dst, a, b);
  else if (isa_.opmask) vmulps(dst | tail_mask_ | T_z, a, b);
  else vmulps(dst, a, masked_operand(b));
}

void GateEmitter::subtract(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Address& b, bool masked) {
  if (!masked) vsubps(dst, a, b);
  else if (isa_.opmask) vsubps(dst | tail_mask_ | T_z, a, b);
  else vsubps(dst, a, masked_operand(b));
}

void GateEmitter::store(const Xbyak::Address& dst, const Xbyak::Xmm& src, bool masked) {
  if (!masked) return vmovups(dst, src);
  if (isa_.opmask) return vmovups(dst | tail_mask_, src);
  load_tail_mask();
  vmaskmovps(dst, mask_scratch_, src);
}

GateEmitter::LaneMask GateEmitter::compare(const Xbyak::Xmm& a, const Xbyak::Operand& b, int predicate) {
  if (isa_.opmask) vcmpps(local_mask_, a, b, static_cast<std::uint8_t>(predicate));
  else vcmpps(mask_scratch_, a, b, static_cast<std::uint8_t>(predicate));
  return {local_mask_, mask_scratch_};
}

void GateEmitter::and_compare(const LaneMask& m, const Xbyak::Xmm& a, const Xbyak::Operand& b, int predicate) {
  if (isa_.opmask) return vcmpps(m.k | m.k, a, b, static_cast<std::uint8_t>(predicate));
  vcmpps(clip_scratch_, a, b, static_cast<std::uint8_t>(predicate));  // b may be clip_scratch_: read first
  vandps(m.v, m.v, clip_scratch_);
}

void GateEmitter::zero_unless(const Xbyak::Xmm& v, const LaneMask& m) {
  if (isa_.opmask) vmovaps(v | m.k | T_z, v);
  else vandps(v, v, m.v);
}

void GateEmitter::scale_by_alpha(const Xbyak::Xmm& v, const LaneMask& m) {
  vbroadcastss(clip_scratch_, relu_alpha());
  if (isa_.opmask) return vmulps(v | m.k, v, clip_scratch_);
  vmulps(clip_scratch_, clip_scratch_, v);
  vblendvps(v, v, clip_scratch_, m.v);
}

// The table after the code: clip, -clip, gate_clip, -gate_clip, relu_alpha, relu_floor.
Xbyak::Address GateEmitter::clip_bound(bool negative) { return ptr[rip + clip_table_ + (negative ? 4 : 0)]; }
Xbyak::Address GateEmitter::gate_clip_bound(bool negative) { return ptr[rip + clip_table_ + (negative ? 12 : 8)]; }
Xbyak::Address GateEmitter::relu_alpha() { return ptr[rip + clip_table_ + 16]; }
Xbyak::Address GateEmitter::relu_floor() { return ptr[rip + clip_table_ + 20]; }

void GateEmitter::clamp_gates(std::span<const Xbyak::Xmm> v) {
  if (!desc_.gate_clip_bits) return;
  // The bound is the first source so that a NaN in v (the second) comes through.
  vbroadcastss(clip_scratch_, gate_clip_bound(true));
  for (const Xbyak::Xmm& r : v) vmaxps(r, clip_scratch_, r);
  vbroadcastss(clip_scratch_, gate_clip_bound(false));
  for (const Xbyak::Xmm& r : v) vminps(r, clip_scratch_, r);
}

void GateEmitter::activate(ActivationRole role, Activation own, std::span<const Xbyak::Xmm> v) {
  if (desc_.custom_activations()) {
    const ActivationFunction f = desc_.activation_of(role);
    if (f.kind != rnnjit::Activation::standard) return act_.apply(f, v);
  }
  if (own == Activation::sigmoid) act_.sigmoid(v);
  else act_.tanh(v);
}

void GateEmitter::store_gate_clip_bounds() {
  const Xbyak::Xmm lo = isa_.vreg(0), hi = isa_.vreg(1);  // slot registers, free before the first row
  for (int pair = 0; pair < 2; ++pair) {
    vbroadcastss(lo, gate_clip_bound(true));
    vbroadcastss(hi, gate_clip_bound(false));
    const Xbyak::Xmm both[] = {lo, hi};
    if (pair == 0) act_.sigmoid(both);
    else act_.tanh(both);
    vmovss(ptr[rsp + 8 * pair], Xbyak::Xmm(lo.getIdx()));
    vmovss(ptr[rsp + 8 * pair + 4], Xbyak::Xmm(hi.getIdx()));
  }
}

void GateEmitter::zero_unless_passed(const Xbyak::Xmm& grad, const Xbyak::Xmm& a, Activation act) {
  if (!desc_.gate_clip_bits) return;
  LaneMask m;
  if (act == Activation::relu) {  // a plain relu(-b) = 0 has no gradient anyway: only a < b matters
    vbroadcastss(clip_scratch_, gate_clip_bound(false));
    m = compare(a, clip_scratch_, 0x11);  // a < b (ordered, quiet: false for NaN)
    if (desc_.relu_alpha_bits) {          // and a > alpha * (-b), as the forward computes it
      vbroadcastss(clip_scratch_, relu_floor());
      and_compare(m, a, clip_scratch_, 0x1e);
    }
  } else {
    const int at = act == Activation::sigmoid ? 0 : 8;
    vbroadcastss(clip_scratch_, ptr[rsp + at + 4]);
    m = compare(a, clip_scratch_, 0x11);  // a < act(b)
    vbroadcastss(clip_scratch_, ptr[rsp + at]);
    and_compare(m, a, clip_scratch_, 0x1e);  // and a > act(-b)
  }
  zero_unless(grad, m);
}

void GateEmitter::clamp_to_clip(const Xbyak::Xmm& v) {
  // The bound is the first source so that a NaN in v (the second) comes through.
  vbroadcastss(clip_scratch_, clip_bound(true));
  vmaxps(v, clip_scratch_, v);
  vbroadcastss(clip_scratch_, clip_bound(false));
  vminps(v, clip_scratch_, v);
}

void GateEmitter::zero_outside_clip(const Xbyak::Xmm& v, const Xbyak::Xmm& c) {
  vbroadcastss(clip_scratch_, clip_bound(false));
  const LaneMask m = compare(c, clip_scratch_, 0x11);  // c < clip (ordered, quiet: false for NaN)
  vbroadcastss(clip_scratch_, clip_bound(true));
  and_compare(m, c, clip_scratch_, 0x1e);  // and c > -clip
  zero_unless(v, m);
}

void GateEmitter::row_pointer(const Xbyak::Reg64& reg, std::size_t offset, std::int64_t row_bytes, int streamed_blocks) {
  row_pointers_.push_back({reg, offset, row_bytes, streamed_blocks});
}

// A step's gx (or reserve) rows come from L3 or memory, in pieces of a few hundred bytes per
// block and row: too short for the hardware prefetcher to ramp up on, and the activations
// leave the loads waiting. Each vector prefetches its line of the row enough rows ahead that
// about kAheadVectors vectors of work (a few hundred cycles each) hide the latency; the rows
// past the last one are the next step's, or are never touched (a prefetch does not fault).
void GateEmitter::prefetch_streamed(int count) {
  constexpr std::int64_t kAheadVectors = 8;
  const std::int64_t vectors_per_row = (std::int64_t{desc_.cols} + isa_.lanes - 1) / isa_.lanes;
  const std::int64_t rows_ahead = (kAheadVectors + vectors_per_row - 1) / vectors_per_row;
  for (const RowPointer& p : row_pointers_)
    for (int block = 0; block < p.streamed_blocks; ++block)
      for (int u = 0; u < count; ++u) {
        const std::int64_t ahead = rows_ahead * p.row_bytes + block * hidden_bytes() + u * isa_.vector_bytes();
        if (ahead <= std::numeric_limits<std::int32_t>::max()) prefetcht0(ptr[p.reg + col_ + static_cast<int>(ahead)]);
      }
}

void GateEmitter::generate() {
  const int unroll = static_cast<int>(desc_.unroll);
  const int full_vectors = static_cast<int>(desc_.cols / isa_.lanes);
  const int tail = static_cast<int>(desc_.cols % isa_.lanes);
  const int blocks = full_vectors / unroll, remainder = full_vectors % unroll;

  const bool gate_bounds = desc_.gate_clip_bits && desc_.pass_kind() == Pass::backward;
  preamble();
  if (gate_bounds) sub(rsp, kGateBoundsBytes);
  for (const RowPointer& p : row_pointers_) mov(p.reg, ptr[abi_arg + static_cast<int>(p.offset)]);
  act_.load_constants();
  if (gate_bounds) store_gate_clip_bounds();
  if (tail && isa_.opmask) {
    mov(eax, (1u << tail) - 1);
    kmovw(tail_mask_, eax);
  }
  mov(row_counter_, desc_.rows);
  Xbyak::Label row_loop;
  L(row_loop);
  xor_(col_, col_);
  if (blocks > 0) {
    Xbyak::Label col_loop;
    mov(block_counter_, blocks);
    L(col_loop);
    prefetch_streamed(unroll);
    body(unroll, false);
    add(col_, unroll * isa_.vector_bytes());
    dec(block_counter_);
    jnz(col_loop, T_NEAR);
  }
  if (remainder > 0) {
    prefetch_streamed(remainder);
    body(remainder, false);
    add(col_, remainder * isa_.vector_bytes());
  }
  if (tail) {
    prefetch_streamed(1);
    body(1, true);
  }
  for (const RowPointer& p : row_pointers_)
    if (p.row_bytes) add(p.reg, static_cast<int>(p.row_bytes));
  dec(row_counter_);
  jnz(row_loop, T_NEAR);
  if (gate_bounds) add(rsp, kGateBoundsBytes);
  postamble();
  text_size_ = getSize();
  act_.emit_constant_table();
  if (desc_.clip_bits || desc_.gate_clip_bits || desc_.relu_alpha_bits) {
    align(4);
    L(clip_table_);
    for (std::uint32_t bits : {desc_.clip_bits, desc_.gate_clip_bits}) {
      dd(bits);
      dd(bits ^ 0x80000000u);  // the negative bound
    }
    dd(desc_.relu_alpha_bits);
    // The leaky relu's floor under a gate clip, rounded as the forward kernel's alpha * -b.
    dd(std::bit_cast<std::uint32_t>(desc_.relu_alpha() * -desc_.gate_clip()));
  }
  if (tail && !isa_.opmask) {
    align(32);
    L(tail_table_);
    for (int lane = 0; lane < isa_.lanes; ++lane) dd(lane < tail ? 0xffffffffu : 0u);
  }
  finalize();
}

}  // namespace rnnjit::x64

// --- the factory: one emitter class per cell family and pass ---------------------------------

#include "codegen/x64/cell_emitters.hpp"

namespace rnnjit::x64 {

ForwardGateEmitter::ForwardGateEmitter(const KernelDesc& desc, int regs_per_slot) : GateEmitter(desc, regs_per_slot) {
  const std::int64_t gate_row = desc.gates() * hidden_bytes();
  row_pointer(gx_, offsetof(GateForwardArgs, gx), desc.gx_stride() * 4, desc.gates());
  row_pointer(gh_, offsetof(GateForwardArgs, gh), gate_row);
  row_pointer(bias_ih_, offsetof(GateForwardArgs, bias_ih), 0);
  row_pointer(bias_hh_, offsetof(GateForwardArgs, bias_hh), 0);
}

std::unique_ptr<GateEmitter> emit_gate_kernel(const KernelDesc& d) {
  const bool fwd = d.pass_kind() == Pass::forward;
  switch (d.cell_kind()) {
    case CellKind::lstm:
      return fwd ? std::unique_ptr<GateEmitter>(new LstmForward(d)) : std::unique_ptr<GateEmitter>(new LstmBackward(d));
    case CellKind::gru:
      return fwd ? std::unique_ptr<GateEmitter>(new GruForward(d)) : std::unique_ptr<GateEmitter>(new GruBackward(d));
    case CellKind::gru_reset_before:
      if (fwd)
        return d.part ? std::unique_ptr<GateEmitter>(new GruResetCandidate(d))
                      : std::unique_ptr<GateEmitter>(new GruResetGates(d));
      return d.part ? std::unique_ptr<GateEmitter>(new GruResetBackwardReset(d))
                    : std::unique_ptr<GateEmitter>(new GruResetBackwardUpdate(d));
    case CellKind::rnn_relu:
    case CellKind::rnn_tanh:
    case CellKind::rnn_sigmoid:
      return fwd ? std::unique_ptr<GateEmitter>(new RnnForward(d)) : std::unique_ptr<GateEmitter>(new RnnBackward(d));
  }
  throw Error(fmt::format("{}: no emitter for this cell", kernel_name(d)));
}

}  // namespace rnnjit::x64
