#include "codegen/x64/gemm_emitter.hpp"

#include <cstddef>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {

GemmEmitter::GemmEmitter(const KernelDesc& d)
    : JitGenerator(), desc_(d), rows_(static_cast<int>(d.rows)), vectors_(static_cast<int>(d.vectors)) {
  check_desc();
  load_args();
  k_loop();
  store_c();
  vzeroupper();
  ret();
  finalize();
}

void GemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::gemm || d.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: not an AVX-512 GEMM descriptor", name));
  if (vectors_ < 1 || rows_ < 1 || rows_ * vectors_ + vectors_ + 2 > kRegisters)
    throw Error(fmt::format("{}: a {}x{} tile needs {} zmm registers, only {} exist", name, rows_, vectors_,
                            rows_ * vectors_ + vectors_ + 2, kRegisters));
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
  if (d.n_tail) {
    mov(eax, (1u << d.n_tail) - 1);
    kmovw(k1, eax);
  }
  for (int i = 0; i < rows_; ++i)
    for (int v = 0; v < vectors_; ++v) vxorps(acc(i, v), acc(i, v), acc(i, v));
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

// C = acc (+ C with beta), the last vector masked to n_tail lanes, or streamed (stream_c).
void GemmEmitter::store_c() {
  const KernelDesc& d = desc_;
  for (int i = 0; i < rows_; ++i)
    for (int v = 0; v < vectors_; ++v) {
      const Xbyak::Address at = ptr[c_ + 4 * i * static_cast<int>(d.c_row_stride) + 64 * v];
      if (d.beta) {
        if (masked(v)) vaddps(acc(i, v) | k1 | T_z, acc(i, v), at);
        else vaddps(acc(i, v), acc(i, v), at);
      }
      if (masked(v)) vmovups(at | k1, acc(i, v));
      else if (d.stream_c) vmovntps(at, acc(i, v));
      else vmovups(at, acc(i, v));
    }
}

void GemmEmitter::k_step(int kk) {
  const int b_off = 4 * kk * static_cast<int>(desc_.b_k_stride);
  for (int v = 0; v < vectors_; ++v) {
    if (masked(v)) vmovups(bvec(v) | k1 | T_z, ptr[b_ + b_off + 64 * v]);
    else vmovups(bvec(v), ptr[b_ + b_off + 64 * v]);
  }
  // Past the last k row these touch lines beyond B; a prefetch never faults.
  const int ahead = b_off + 4 * static_cast<int>(desc_.b_lookahead * desc_.b_k_stride);
  if (desc_.b_lookahead)
    for (int v = 0; v < vectors_; ++v) prefetcht0(ptr[b_ + ahead + 64 * v]);
  for (int i = 0; i < rows_; ++i) {
    vbroadcastss(bcast(i), ptr[a_ + 4 * (i * static_cast<int>(desc_.a_row_stride) + kk * static_cast<int>(desc_.a_k_stride))]);
    for (int v = 0; v < vectors_; ++v) vfmadd231ps(acc(i, v), bvec(v), bcast(i));
  }
}

}  // namespace rnnjit::x64
