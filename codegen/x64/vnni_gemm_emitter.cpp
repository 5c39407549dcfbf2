#include "codegen/x64/vnni_gemm_emitter.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/int8_unit.hpp"
#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

constexpr int kQuadsPerTile = 16;  // k quads per k tile (64 k)
constexpr int kTileBytes = 1024;   // one packed column tile of a k tile: 16 k quads x 16 columns x 4 int8
constexpr int kQuadBytes = 64;     // one k quad of a column tile: a zmm, two ymm

}  // namespace

VnniGemmEmitter::VnniGemmEmitter(const KernelDesc& d)
    : JitGenerator(),
      desc_(d),
      isa_(vector_isa(d.isa_kind())),
      unit_(static_cast<Int8Unit>(d.int8_unit)),
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

int VnniGemmEmitter::lanes_of(int r) const {
  if (desc_.n_tail == 0 || r / per_vector_ != vectors_ - 1) return isa_.lanes;
  return std::clamp(static_cast<int>(desc_.n_tail) - (r % per_vector_) * isa_.lanes, 0, isa_.lanes);
}

void VnniGemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::vnni_gemm || unit_ == Int8Unit::amx || d.int8_unit > 3 ||
      d.isa_kind() != int8_kernel_isa(unit_))
    throw Error(fmt::format("{}: not an int8 GEMM descriptor of the vector units (isa avx512 with avx512_vnni, isa "
                            "avx2 with avx_vnni or avx2)",
                            name));
  if (vectors_ < 1 || rows_ < 1 || rows_ > int8_max_rows(vectors_, isa_.isa))
    throw Error(fmt::format("{}: a {}x{} tile needs {} {} registers, only {} exist", name, rows_, vectors_,
                            (rows_ + 1) * regs_ + int8_other_registers(isa_.isa), to_string(isa_.isa),
                            isa_.registers));
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

// The pointers and k (in tiles of 64) from the argument struct, the tail mask (AVX-512), the
// int16 ones (avx2), zeroed sums.
void VnniGemmEmitter::load_args() {
  mov(a_, ptr[abi_arg + offsetof(Int8GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(Int8GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(Int8GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(Int8GemmArgs, k)]);
  mov(scale_, ptr[abi_arg + offsetof(Int8GemmArgs, a_scale)]);
  if (desc_.n_tail && isa_.opmask) {
    mov(eax, (1u << desc_.n_tail) - 1);
    kmovw(k1, eax);
  }
  if (unit_ == Int8Unit::avx2) {
    vpcmpeqw(ones(), ones(), ones());
    vpsrlw(ones(), ones(), 15);
  }
  for (int i = 0; i < rows_; ++i)
    for (int r = 0; r < regs_; ++r) {
      if (isa_.opmask) vpxord(acc(i, r), acc(i, r), acc(i, r));
      else vpxor(acc(i, r), acc(i, r), acc(i, r));
    }
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

// The first source of vpdpbusd and vpmaddubsw is the unsigned one, a register: A's quad is
// broadcast into one (a load-port broadcast, no shuffle), B's signed registers are the second.
// A half of B that n_tail leaves out is neither loaded nor multiplied.
void VnniGemmEmitter::k_quad(int quad) {
  for (int r = 0; r < regs_; ++r) {
    if (!lanes_of(r)) continue;
    const Xbyak::Address at = ptr[b_ + (r / per_vector_) * kTileBytes + quad * kQuadBytes + (r % per_vector_) * isa_.vector_bytes()];
    if (isa_.opmask) vmovdqu32(bvec(r), at);
    else vmovdqu(bvec(r), at);
  }
  for (int i = 0; i < rows_; ++i) {
    vpbroadcastd(bcast(i), ptr[a_ + i * static_cast<int>(desc_.a_row_stride) + 4 * quad]);
    for (int r = 0; r < regs_; ++r)
      if (lanes_of(r)) dot(acc(i, r), bcast(i), bvec(r));
  }
}

void VnniGemmEmitter::dot(const Xbyak::Xmm& sum, const Xbyak::Xmm& a, const Xbyak::Xmm& b) {
  switch (unit_) {
    case Int8Unit::avx512_vnni: vpdpbusd(sum, a, b, Xbyak::EvexEncoding); break;
    case Int8Unit::avx_vnni: vpdpbusd(sum, a, b, Xbyak::VexEncoding); break;
    case Int8Unit::avx2:
      // Two uint8 x int8 products a pair into int16 (exact: activations of 7 bits), the pairs
      // of each quad into int32, then into the sum.
      vpmaddubsw(product(), a, b);
      vpmaddwd(product(), product(), ones());
      vpaddd(sum, sum, product());
      break;
    default: throw Error(fmt::format("{}: no dot step for int8 unit {}", kernel_name(desc_), to_string(unit_)));
  }
}

// C = float(sum - compensation) * scale_w * scale_a (+ C with beta), the last vector masked
// to n_tail lanes; the multiplications in that order, as the scalar twin does them.
void VnniGemmEmitter::store_c() {
  const int tiles = static_cast<int>(desc_.b_k_stride);
  if (!isa_.opmask && desc_.n_tail % isa_.lanes) vmovups(product(), ptr[rip + tail_table_]);
  for (int r = 0; r < regs_; ++r) {
    if (!lanes_of(r)) continue;
    if (isa_.opmask) vmovdqu32(bvec(r), ptr[b_ + part(r)]);  // compensations
    else vmovdqu(bvec(r), ptr[b_ + part(r)]);
    for (int i = 0; i < rows_; ++i) {
      vpsubd(acc(i, r), acc(i, r), bvec(r));
      vcvtdq2ps(acc(i, r), acc(i, r));
    }
    vmovups(bvec(r), ptr[b_ + 64 * tiles + part(r)]);  // the columns' scales
    for (int i = 0; i < rows_; ++i) vmulps(acc(i, r), acc(i, r), bvec(r));
  }
  for (int i = 0; i < rows_; ++i) {
    vbroadcastss(bcast(0), ptr[scale_ + 4 * i]);
    for (int r = 0; r < regs_; ++r) {
      if (!lanes_of(r)) continue;
      vmulps(acc(i, r), acc(i, r), bcast(0));
      const Xbyak::Address at = ptr[c_ + 4 * i * static_cast<int>(desc_.c_row_stride) + part(r)];
      if (desc_.beta) {
        if (!masked(r)) vaddps(acc(i, r), acc(i, r), at);
        else if (isa_.opmask) vaddps(acc(i, r) | k1 | T_z, acc(i, r), at);
        else {
          vmaskmovps(ones(), product(), at);
          vaddps(acc(i, r), acc(i, r), ones());
        }
      }
      if (!masked(r)) vmovups(at, acc(i, r));
      else if (isa_.opmask) vmovups(at | k1, acc(i, r));
      else vmaskmovps(at, product(), acc(i, r));
    }
  }
}

}  // namespace rnnjit::x64
