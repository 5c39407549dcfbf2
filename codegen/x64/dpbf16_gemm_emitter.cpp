#include "codegen/x64/dpbf16_gemm_emitter.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

constexpr int kPairsPerTile = 16;   // k pairs per k tile (32 k)
constexpr int kTileBytes = 1024;    // one packed column tile of a k tile: 16 k pairs x 16 columns x 2 bf16
constexpr int kPairBytes = 64;      // one k pair of a column tile: a zmm

}  // namespace

Dpbf16GemmEmitter::Dpbf16GemmEmitter(const KernelDesc& d)
    : JitGenerator(), desc_(d), rows_(static_cast<int>(d.rows)), vectors_(static_cast<int>(d.vectors)) {
  check_desc();
  load_args();
  k_loop();
  store_c();
  vzeroupper();
  ret();
  finalize();
}

void Dpbf16GemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::dpbf16_gemm || d.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: not an AVX512_BF16 GEMM descriptor", name));
  if (vectors_ < 1 || rows_ < 1 || rows_ * vectors_ + vectors_ + 2 > kZmmRegisters)
    throw Error(fmt::format("{}: a {}x{} tile needs {} zmm registers, only {} exist", name, rows_, vectors_,
                            rows_ * vectors_ + vectors_ + 2, kZmmRegisters));
  if (d.n_tail > 15 || d.b_k_stride < d.vectors || d.b_k_stride > 8 || d.b_lookahead > 16)
    throw Error(fmt::format("{}: n_tail must be < 16, vectors <= b_k_stride <= 8 and b_lookahead <= 16", name));
  if (d.a_row_stride == 0 || d.a_row_stride % (2 * kPairsPerTile) != 0 || d.c_row_stride == 0)
    throw Error(fmt::format("{}: A's row stride must be a positive multiple of 32 and C's positive", name));
  const std::int64_t reach =
      std::max<std::int64_t>({2 * std::int64_t{rows_} * d.a_row_stride, 4 * std::int64_t{rows_} * d.c_row_stride,
                              (std::int64_t{d.b_lookahead} + 1) * d.b_k_stride * kTileBytes});
  if (reach > std::numeric_limits<std::int32_t>::max())
    throw Error(fmt::format("{}: strides too large for 32-bit displacements", name));
}

// The pointers and k (in tiles of 32) from the argument struct, the tail mask, zeroed sums.
void Dpbf16GemmEmitter::load_args() {
  mov(a_, ptr[abi_arg + offsetof(GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(GemmArgs, k)]);
  if (desc_.n_tail) {
    mov(eax, (1u << desc_.n_tail) - 1);
    kmovw(k1, eax);
  }
  for (int i = 0; i < rows_; ++i)
    for (int v = 0; v < vectors_; ++v) vxorps(acc(i, v), acc(i, v), acc(i, v));
}

// One k tile a trip, its 16 pairs unrolled; then the prefetch of B's tiles b_lookahead on.
// The padding of A's rows and of B's panels is zeros, so no k needs a mask.
void Dpbf16GemmEmitter::k_loop() {
  const int b_step = static_cast<int>(desc_.b_k_stride) * kTileBytes;
  Xbyak::Label loop;
  L(loop);
  for (int pair = 0; pair < kPairsPerTile; ++pair) k_pair(pair);
  // Past the panel's end these touch the next panel, or lines beyond B: a prefetch never faults.
  for (int v = 0; desc_.b_lookahead && v < vectors_; ++v)
    for (int line = 0; line < kTileBytes / 64; ++line)
      prefetcht0(ptr[b_ + static_cast<int>(desc_.b_lookahead) * b_step + v * kTileBytes + line * 64]);
  add(a_, 2 * kPairsPerTile * 2);
  add(b_, b_step);
  dec(k_);
  jnz(loop, T_NEAR);
}

void Dpbf16GemmEmitter::k_pair(int pair) {
  for (int v = 0; v < vectors_; ++v) vmovups(bvec(v), ptr[b_ + v * kTileBytes + pair * kPairBytes]);
  for (int i = 0; i < rows_; ++i) {
    const int a_pair = 2 * i * static_cast<int>(desc_.a_row_stride) + 4 * pair;  // bytes
    if (vectors_ == 1) {
      vdpbf16ps(acc(i, 0), bvec(0), ptr_b[a_ + a_pair]);  // A's pair broadcast {1to16} by the instruction
      continue;
    }
    vpbroadcastd(bcast(i), ptr[a_ + a_pair]);
    for (int v = 0; v < vectors_; ++v) vdpbf16ps(acc(i, v), bvec(v), bcast(i));
  }
}

// C = sums (+ C with beta), the last vector masked to n_tail lanes.
void Dpbf16GemmEmitter::store_c() {
  for (int i = 0; i < rows_; ++i)
    for (int v = 0; v < vectors_; ++v) {
      const Xbyak::Address at = ptr[c_ + 4 * i * static_cast<int>(desc_.c_row_stride) + 64 * v];
      if (desc_.beta) {
        if (masked(v)) vaddps(acc(i, v) | k1 | T_z, acc(i, v), at);
        else vaddps(acc(i, v), acc(i, v), at);
      }
      if (masked(v)) vmovups(at | k1, acc(i, v));
      else vmovups(at, acc(i, v));
    }
}

}  // namespace rnnjit::x64
