#include "codegen/x64/gate_emitter.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
ActivationRegisters gate_activation_registers() {
  using Xbyak::Zmm;
  ActivationRegisters r{Zmm(28), Zmm(29), Zmm(30), Zmm(31), {},
                        {Xbyak::Opmask(2), Xbyak::Opmask(3), Xbyak::Opmask(4), Xbyak::Opmask(6)}};
  for (int i = 16; i <= 27; ++i) r.scratch.emplace_back(i);
  return r;
}

GateEmitter::GateEmitter(const KernelDesc& desc, int regs_per_slot)
    : JitGenerator(), desc_(desc), regs_per_slot_(regs_per_slot), act_(*this, gate_activation_registers()) {
  if (desc.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: the AVX-512 emitter cannot emit isa {}", kernel_name(desc), to_string(desc.isa_kind())));
  if (desc.unroll < 1 || static_cast<int>(desc.unroll) * regs_per_slot > kSlotRegisters)
    throw Error(fmt::format("{}: unroll {} needs {} slot registers, only {} exist", kernel_name(desc), desc.unroll,
                            static_cast<int>(desc.unroll) * regs_per_slot, kSlotRegisters));
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
  if ((desc.peephole || desc.input_forget) && desc.cell_kind() != CellKind::lstm)
    throw Error(fmt::format("{}: peephole and input_forget need an LSTM", kernel_name(desc)));
  if (desc.cols < 1 || desc.cols > desc.hidden)
    throw Error(fmt::format("{}: cols must be in [1, hidden = {}], got {}", kernel_name(desc), desc.hidden, desc.cols));
}

Xbyak::Zmm GateEmitter::slot(int u, int i) const { return Xbyak::Zmm(u * regs_per_slot_ + i); }

std::vector<Xbyak::Zmm> GateEmitter::slots(int count, int i) const {
  std::vector<Xbyak::Zmm> r;
  for (int u = 0; u < count; ++u) r.push_back(slot(u, i));
  return r;
}

Xbyak::Address GateEmitter::at(const Xbyak::Reg64& base, int gate, int u) const {
  return ptr[base + col_ + static_cast<int>(gate * hidden_bytes() + u * kVector * 4)];
}

void GateEmitter::load(const Xbyak::Zmm& dst, const Xbyak::Address& src, bool masked) {
  if (masked) vmovups(dst | tail_mask_ | T_z, src);
  else vmovups(dst, src);
}

void GateEmitter::accumulate(const Xbyak::Zmm& dst, const Xbyak::Address& src, bool masked) {
  if (masked) vaddps(dst | tail_mask_ | T_z, dst, src);
  else vaddps(dst, dst, src);
}

void GateEmitter::accumulate_product(const Xbyak::Zmm& dst, const Xbyak::Zmm& a, const Xbyak::Address& b,
                                     bool masked) {
  if (masked) vfmadd231ps(dst | tail_mask_ | T_z, a, b);
  else vfmadd231ps(dst, a, b);
}

void GateEmitter::store(const Xbyak::Address& dst, const Xbyak::Zmm& src, bool masked) {
  if (masked) vmovups(dst | tail_mask_, src);
  else vmovups(dst, src);
}

// The table after the code: clip, -clip, gate_clip, -gate_clip.
Xbyak::Address GateEmitter::clip_bound(bool negative) { return ptr[rip + clip_table_ + (negative ? 4 : 0)]; }
Xbyak::Address GateEmitter::gate_clip_bound(bool negative) { return ptr[rip + clip_table_ + (negative ? 12 : 8)]; }
Xbyak::Address GateEmitter::relu_alpha() { return ptr_b[rip + clip_table_ + 16]; }

void GateEmitter::clamp_gates(std::span<const Xbyak::Zmm> v) {
  if (!desc_.gate_clip_bits) return;
  // The bound is the first source so that a NaN in v (the second) comes through.
  vbroadcastss(clip_scratch_, gate_clip_bound(true));
  for (const Xbyak::Zmm& r : v) vmaxps(r, clip_scratch_, r);
  vbroadcastss(clip_scratch_, gate_clip_bound(false));
  for (const Xbyak::Zmm& r : v) vminps(r, clip_scratch_, r);
}

void GateEmitter::store_gate_clip_bounds() {
  const Xbyak::Zmm lo(0), hi(1);  // slot registers, free before the first row
  for (int pair = 0; pair < 2; ++pair) {
    vbroadcastss(lo, gate_clip_bound(true));
    vbroadcastss(hi, gate_clip_bound(false));
    const Xbyak::Zmm both[] = {lo, hi};
    if (pair == 0) act_.sigmoid(both);
    else act_.tanh(both);
    vmovss(ptr[rsp + 8 * pair], Xbyak::Xmm(lo.getIdx()));
    vmovss(ptr[rsp + 8 * pair + 4], Xbyak::Xmm(hi.getIdx()));
  }
}

void GateEmitter::zero_unless_passed(const Xbyak::Zmm& grad, const Xbyak::Zmm& a, Activation act) {
  if (!desc_.gate_clip_bits) return;
  if (act == Activation::relu) {  // a plain relu(-b) = 0 has no gradient anyway: only a < b matters
    vbroadcastss(clip_scratch_, gate_clip_bound(false));
    vcmpps(local_mask_, a, clip_scratch_, 0x11);  // a < b (ordered, quiet: false for NaN)
    if (desc_.relu_alpha_bits) {                  // and a > alpha * (-b), as the forward computes it
      vbroadcastss(clip_scratch_, gate_clip_bound(true));
      vmulps(clip_scratch_, clip_scratch_, relu_alpha());
      vcmpps(local_mask_ | local_mask_, a, clip_scratch_, 0x1e);
    }
  } else {
    const int at = act == Activation::sigmoid ? 0 : 8;
    vcmpps(local_mask_, a, ptr_b[rsp + at + 4], 0x11);            // a < act(b)
    vcmpps(local_mask_ | local_mask_, a, ptr_b[rsp + at], 0x1e);  // and a > act(-b)
  }
  vmovaps(grad | local_mask_ | T_z, grad);
}

void GateEmitter::clamp_to_clip(const Xbyak::Zmm& v) {
  // The bound is the first source so that a NaN in v (the second) comes through.
  vbroadcastss(clip_scratch_, clip_bound(true));
  vmaxps(v, clip_scratch_, v);
  vbroadcastss(clip_scratch_, clip_bound(false));
  vminps(v, clip_scratch_, v);
}

void GateEmitter::inside_clip(const Xbyak::Opmask& k, const Xbyak::Zmm& c) {
  vbroadcastss(clip_scratch_, clip_bound(false));
  vcmpps(k, c, clip_scratch_, 0x11);  // c < clip (ordered, quiet: false for NaN)
  vbroadcastss(clip_scratch_, clip_bound(true));
  vcmpps(k | k, c, clip_scratch_, 0x1e);  // and c > -clip
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
  const std::int64_t vectors_per_row = (std::int64_t{desc_.cols} + kVector - 1) / kVector;
  const std::int64_t rows_ahead = (kAheadVectors + vectors_per_row - 1) / vectors_per_row;
  for (const RowPointer& p : row_pointers_)
    for (int block = 0; block < p.streamed_blocks; ++block)
      for (int u = 0; u < count; ++u) {
        const std::int64_t ahead = rows_ahead * p.row_bytes + block * hidden_bytes() + u * kVector * 4;
        if (ahead <= std::numeric_limits<std::int32_t>::max()) prefetcht0(ptr[p.reg + col_ + static_cast<int>(ahead)]);
      }
}

void GateEmitter::generate() {
  const int unroll = static_cast<int>(desc_.unroll);
  const int full_vectors = static_cast<int>(desc_.cols / kVector);
  const int tail = static_cast<int>(desc_.cols % kVector);
  const int blocks = full_vectors / unroll, remainder = full_vectors % unroll;

  const bool gate_bounds = desc_.gate_clip_bits && desc_.pass_kind() == Pass::backward;
  preamble();
  if (gate_bounds) sub(rsp, kGateBoundsBytes);
  for (const RowPointer& p : row_pointers_) mov(p.reg, ptr[abi_arg + static_cast<int>(p.offset)]);
  act_.load_constants();
  if (gate_bounds) store_gate_clip_bounds();
  if (tail) {
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
    add(col_, unroll * kVector * 4);
    dec(block_counter_);
    jnz(col_loop, T_NEAR);
  }
  if (remainder > 0) {
    prefetch_streamed(remainder);
    body(remainder, false);
    add(col_, remainder * kVector * 4);
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
