#include "codegen/x64/vnni_gemm_emitter.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

constexpr int kQuadsPerTile = 16;  // k quads per k tile (64 k)
constexpr int kTileBytes = 1024;   // one packed column tile of a k tile: 16 k quads x 16 columns x 4 int8
constexpr int kQuadBytes = 64;     // one k quad of a column tile: a zmm

}  // namespace

VnniGemmEmitter::VnniGemmEmitter(const KernelDesc& d)
    : JitGenerator(), desc_(d), rows_(static_cast<int>(d.rows)), vectors_(static_cast<int>(d.vectors)) {
  check_desc();
  load_args();
  k_loop();
  store_c();
  vzeroupper();
  ret();
  finalize();
}

void VnniGemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::vnni_gemm || d.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: not an AVX512-VNNI int8 GEMM descriptor", name));
  if (vectors_ < 1 || rows_ < 1 || rows_ * vectors_ + vectors_ + 2 > kZmmRegisters)
    throw Error(fmt::format("{}: a {}x{} tile needs {} zmm registers, only {} exist", name, rows_, vectors_,
                            rows_ * vectors_ + vectors_ + 2, kZmmRegisters));
  if (d.n_tail > 15 || d.b_k_stride < d.vectors || d.b_k_stride > 8 || d.b_lookahead > 16)
    throw Error(fmt::format("{}: n_tail must be < 16, vectors <= b_k_stride <= 8 and b_lookahead <= 16", name));
  if (d.a_row_stride == 0 || d.a_row_stride % kInt8TileK != 0 || d.c_row_stride == 0)
    throw Error(fmt::format("{}: A's row stride must be a positive multiple of 64 bytes and C's positive", name));
  const std::int64_t reach =
      std::max<std::int64_t>({std::int64_t{rows_} * d.a_row_stride, 4 * std::int64_t{rows_} * d.c_row_stride,
                              (std::int64_t{d.b_lookahead} + 1) * d.b_k_stride * kTileBytes});
  if (reach > std::numeric_limits<std::int32_t>::max())
    throw Error(fmt::format("{}: strides too large for 32-bit displacements", name));
}

// The pointers and k (in tiles of 64) from the argument struct, the tail mask, zeroed sums.
void VnniGemmEmitter::load_args() {
  mov(a_, ptr[abi_arg + offsetof(Int8GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(Int8GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(Int8GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(Int8GemmArgs, k)]);
  mov(scale_, ptr[abi_arg + offsetof(Int8GemmArgs, a_scale)]);
  if (desc_.n_tail) {
    mov(eax, (1u << desc_.n_tail) - 1);
    kmovw(k1, eax);
  }
  for (int i = 0; i < rows_; ++i)
    for (int v = 0; v < vectors_; ++v) vpxord(acc(i, v), acc(i, v), acc(i, v));
}

// One k tile a trip, its 16 quads unrolled; then the prefetch of B's tiles b_lookahead on.
// B's padding is zeros, so no k needs a mask. The loop leaves b_ at the panel's compensations.
void VnniGemmEmitter::k_loop() {
  const int b_step = static_cast<int>(desc_.b_k_stride) * kTileBytes;
  Xbyak::Label loop;
  L(loop);
  for (int quad = 0; quad < kQuadsPerTile; ++quad) k_quad(quad);
  // Past the panel's end these touch the next panel, or lines beyond B: a prefetch never faults.
  for (int v = 0; desc_.b_lookahead && v < vectors_; ++v)
    for (int line = 0; line < kTileBytes / 64; ++line)
      prefetcht0(ptr[b_ + static_cast<int>(desc_.b_lookahead) * b_step + v * kTileBytes + line * 64]);
  add(a_, static_cast<std::uint32_t>(kInt8TileK));
  add(b_, b_step);
  dec(k_);
  jnz(loop, T_NEAR);
}

// vpdpbusd's first source is the unsigned one, a register: A's quad is broadcast into one (a
// load-port broadcast, no shuffle), B's signed vectors are the second.
void VnniGemmEmitter::k_quad(int quad) {
  for (int v = 0; v < vectors_; ++v) vmovdqu32(bvec(v), ptr[b_ + v * kTileBytes + quad * kQuadBytes]);
  for (int i = 0; i < rows_; ++i) {
    vpbroadcastd(bcast(i), ptr[a_ + i * static_cast<int>(desc_.a_row_stride) + 4 * quad]);
    for (int v = 0; v < vectors_; ++v) vpdpbusd(acc(i, v), bcast(i), bvec(v), Xbyak::EvexEncoding);
  }
}

// C = float(sum - compensation) * scale_w * scale_a (+ C with beta), the last vector masked
// to n_tail lanes; the multiplications in that order, as the scalar twin does them.
void VnniGemmEmitter::store_c() {
  const int tiles = static_cast<int>(desc_.b_k_stride);
  for (int v = 0; v < vectors_; ++v) {
    vmovdqu32(bvec(v), ptr[b_ + 64 * v]);  // compensations
    for (int i = 0; i < rows_; ++i) {
      vpsubd(acc(i, v), acc(i, v), bvec(v));
      vcvtdq2ps(acc(i, v), acc(i, v));
    }
    vmovups(bvec(v), ptr[b_ + 64 * tiles + 64 * v]);  // the columns' scales
    for (int i = 0; i < rows_; ++i) vmulps(acc(i, v), acc(i, v), bvec(v));
  }
  for (int i = 0; i < rows_; ++i) {
    vbroadcastss(bcast(0), ptr[scale_ + 4 * i]);
    for (int v = 0; v < vectors_; ++v) {
      vmulps(acc(i, v), acc(i, v), bcast(0));
      const Xbyak::Address at = ptr[c_ + 4 * i * static_cast<int>(desc_.c_row_stride) + 64 * v];
      if (desc_.beta) {
        if (masked(v)) vaddps(acc(i, v) | k1 | T_z, acc(i, v), at);
        else vaddps(acc(i, v), acc(i, v), at);
      }
      if (masked(v)) vmovups(at | k1, acc(i, v));
      else vmovups(at, acc(i, v));
    }
  }
}

}  // namespace rnnjit::x64
