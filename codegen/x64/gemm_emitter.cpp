#include "codegen/x64/gemm_emitter.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {

GemmEmitter::GemmEmitter(const KernelDesc& d)
    : JitGenerator(),
      desc_(d),
      isa_(vector_isa(d.isa_kind())),
      rows_(static_cast<int>(d.rows)),
      vectors_(static_cast<int>(d.vectors)),
      per_vector_(gemm_registers_per_vector(d.isa_kind())),
      regs_(vectors_ * per_vector_) {
  check_desc();
  load_args();
  k_loop();
  store_c();
  vzeroupper();
  ret();
  text_size_ = getSize();
  if (!isa_.opmask && desc_.n_tail % isa_.lanes) {  // the lanes of the half n_tail cuts
    align(32);
    L(tail_table_);
    for (int lane = 0; lane < isa_.lanes; ++lane) dd(lane < desc_.n_tail % isa_.lanes ? 0xffffffffu : 0u);
  }
  finalize();
}

int GemmEmitter::lanes_of(int r) const {
  if (desc_.n_tail == 0 || r / per_vector_ != vectors_ - 1) return isa_.lanes;
  return std::clamp(static_cast<int>(desc_.n_tail) - (r % per_vector_) * isa_.lanes, 0, isa_.lanes);
}

void GemmEmitter::load(const Xbyak::Xmm& dst, const Xbyak::Address& src, int r) {
  if (!masked(r)) vmovups(dst, src);
  else if (isa_.opmask) vmovups(dst | k1 | T_z, src);
  else vmaskmovps(dst, tail_mask(), src);
}

void GemmEmitter::store(const Xbyak::Address& dst, const Xbyak::Xmm& src, int r) {
  if (!masked(r)) vmovups(dst, src);
  else if (isa_.opmask) vmovups(dst | k1, src);
  else vmaskmovps(dst, tail_mask(), src);
}

void GemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::gemm) throw Error(fmt::format("{}: not a GEMM descriptor", name));
  if (vectors_ < 1 || rows_ < 1 || rows_ > gemm_max_rows(vectors_, isa_.isa))
    throw Error(fmt::format("{}: a {}x{} tile needs {} {} registers, only {} exist", name, rows_, vectors_,
                            (rows_ + 1) * regs_ + kGemmOtherRegisters, to_string(isa_.isa), isa_.registers));
  if (d.stream_c && (d.beta || d.n_tail || d.c_row_stride % 16))
    throw Error(fmt::format("{}: streaming stores need beta 0, no n_tail and 64-byte aligned rows of C", name));
  if (d.n_tail > 15 || d.unroll < 1 || d.unroll > 16 || d.a_lookahead != 0 || d.b_lookahead > 64 ||
      d.next_b_lines > 8)
    throw Error(fmt::format("{}: n_tail must be < 16, unroll in [1, 16], no a_lookahead (an amx_gemm field), "
                            "b_lookahead at most 64 and next_b_lines at most 8",
                            name));
  const std::int64_t b_rows = std::int64_t{d.unroll} + d.b_lookahead;
  const std::int64_t reach = 4 * (std::int64_t{rows_} * d.a_row_stride + std::int64_t{d.unroll} * d.a_k_stride +
                                  std::int64_t{rows_} * d.c_row_stride + b_rows * d.b_k_stride) + 64 * vectors_;
  if (reach > std::numeric_limits<std::int32_t>::max())
    throw Error(fmt::format("{}: strides too large for 32-bit displacements", name));
}

// The pointers and k from the argument struct, the tail mask, zeroed accumulators.
void GemmEmitter::load_args() {
  const KernelDesc& d = desc_;
  mov(a_, ptr[abi_arg + offsetof(GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(GemmArgs, k)]);
  if (d.next_b_lines) mov(next_b_, ptr[abi_arg + offsetof(GemmArgs, next_b)]);
  if (d.n_tail && isa_.opmask) {
    mov(eax, (1u << d.n_tail) - 1);
    kmovw(k1, eax);
  }
  if (!isa_.opmask && d.n_tail % isa_.lanes) vmovups(tail_mask(), ptr[rip + tail_table_]);
  for (int i = 0; i < rows_; ++i)
    for (int r = 0; r < regs_; ++r)
      if (lanes_of(r)) vxorps(acc(i, r), acc(i, r), acc(i, r));
}

// The k loop, unrolled `unroll` times (its first k step prefetching next_b_lines of the next
// panel), then one k step at a time for the remainder.
void GemmEmitter::k_loop() {
  const KernelDesc& d = desc_;
  const int u = static_cast<int>(d.unroll);
  Xbyak::Label main_loop, remainder, remainder_loop, done;
  cmp(k_, u);
  jl(remainder, T_NEAR);
  L(main_loop);
  for (int kk = 0; kk < u; ++kk) {
    k_step(kk);
    for (int line = 0; kk == 0 && line < static_cast<int>(d.next_b_lines); ++line)
      prefetcht2(ptr[next_b_ + 64 * line]);
  }
  if (d.next_b_lines) add(next_b_, 64 * static_cast<int>(d.next_b_lines));
  add(a_, u * 4 * static_cast<int>(d.a_k_stride));
  add(b_, u * 4 * static_cast<int>(d.b_k_stride));
  sub(k_, u);
  cmp(k_, u);
  jge(main_loop, T_NEAR);
  L(remainder);
  test(k_, k_);
  jz(done, T_NEAR);
  L(remainder_loop);
  k_step(0);
  add(a_, 4 * static_cast<int>(d.a_k_stride));
  add(b_, 4 * static_cast<int>(d.b_k_stride));
  dec(k_);
  jnz(remainder_loop, T_NEAR);
  L(done);
}

Xbyak::Address GemmEmitter::c_at(int i, int r) {
  return ptr[c_ + 4 * i * static_cast<int>(desc_.c_row_stride) + isa_.vector_bytes() * r];
}

// C = acc (+ C with beta), the last vector cut to n_tail lanes, or streamed (stream_c). With
// beta, C's tail comes in through B's first register (free after the k loop).
void GemmEmitter::store_c() {
  const KernelDesc& d = desc_;
  for (int i = 0; i < rows_; ++i)
    for (int r = 0; r < regs_; ++r) {
      if (!lanes_of(r)) continue;
      if (d.beta) {
        if (!masked(r)) vaddps(acc(i, r), acc(i, r), c_at(i, r));
        else if (isa_.opmask) vaddps(acc(i, r) | k1 | T_z, acc(i, r), c_at(i, r));
        else {
          load(bvec(0), c_at(i, r), r);
          vaddps(acc(i, r), acc(i, r), bvec(0));
        }
      }
      if (d.stream_c) vmovntps(c_at(i, r), acc(i, r));
      else store(c_at(i, r), acc(i, r), r);
    }
}

void GemmEmitter::k_step(int kk) {
  const int b_off = 4 * kk * static_cast<int>(desc_.b_k_stride);
  for (int r = 0; r < regs_; ++r)
    if (lanes_of(r)) load(bvec(r), ptr[b_ + b_off + isa_.vector_bytes() * r], r);
  // Past the last k row these touch lines beyond B; a prefetch never faults.
  const int ahead = b_off + 4 * static_cast<int>(desc_.b_lookahead * desc_.b_k_stride);
  if (desc_.b_lookahead)
    for (int v = 0; v < vectors_; ++v) prefetcht0(ptr[b_ + ahead + 64 * v]);
  for (int i = 0; i < rows_; ++i) {
    vbroadcastss(bcast(i), ptr[a_ + 4 * (i * static_cast<int>(desc_.a_row_stride) + kk * static_cast<int>(desc_.a_k_stride))]);
    for (int r = 0; r < regs_; ++r)
      if (lanes_of(r)) vfmadd231ps(acc(i, r), bvec(r), bcast(i));
  }
}

}  // namespace rnnjit::x64
