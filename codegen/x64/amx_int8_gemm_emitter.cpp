#include "codegen/x64/amx_int8_gemm_emitter.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/int8_layout.hpp"
#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

constexpr int kTileRows = 16;     // rows of every tile (A, C: matrix rows; B: quads of k)
constexpr int kTileBytes = 1024;  // one packed B tile: 16 k quads x 16 columns x 4 int8; one C tile
constexpr int kKTile = 64;        // k per tile step (64 bytes of uint8 per A row)
constexpr int kFirstA = 4, kFirstB = 6;
constexpr int kScratchBytes = 4 * kTileBytes;  // the four C tiles, rows of 64 bytes

}  // namespace

AmxInt8GemmEmitter::AmxInt8GemmEmitter(const KernelDesc& d) : JitGenerator(16 * 1024), desc_(d) {
  check_desc();
  row_tiles_ = (static_cast<int>(d.rows) + kTileRows - 1) / kTileRows;
  column_tiles_ = d.vectors;
  load_args();
  k_loop();
  store_c();
  // The tiles stay configured (as the AMX-BF16 kernel's): the executor releases them.
  vzeroupper();
  ret();
  text_size_ = getSize();
  emit_tile_config();
  finalize();
}

void AmxInt8GemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::amx_int8_gemm || d.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: not an AMX-INT8 GEMM descriptor", name));
  if (d.rows < 1 || d.rows > 2 * kTileRows || d.vectors < 1 || d.vectors > 2 || d.n_tail > 15 ||
      d.b_k_stride < d.vectors || d.b_k_stride > 2 || d.b_lookahead > 16 || d.a_lookahead > 16)
    throw Error(fmt::format(
        "{}: an AMX tile block has 1-32 rows, 1-2 column tiles of a panel of 1-2 (b_k_stride), n_tail < 16, "
        "b_lookahead <= 16 and a_lookahead <= 16",
        name));
  if (d.a_row_stride % kKTile != 0 || d.a_row_stride == 0 || d.c_row_stride == 0)
    throw Error(fmt::format("{}: A's row stride must be a positive multiple of {} bytes and C's positive", name, kKTile));
  const std::int64_t a_reach = 2 * kTileRows * std::int64_t{d.a_row_stride} + d.a_lookahead * kKTile;
  const std::int64_t reach = std::max<std::int64_t>(a_reach, 2 * kTileRows * 4 * std::int64_t{d.c_row_stride});
  if (reach > std::numeric_limits<std::int32_t>::max())
    throw Error(fmt::format("{}: strides too large for 32-bit displacements", name));
}

// The tile configuration (once per thread: Int8GemmArgs::configured), the pointers, k and the
// strides from the argument struct, the scratch block, and C's tiles zeroed.
void AmxInt8GemmEmitter::load_args() {
  Xbyak::Label configured;
  cmp(qword[abi_arg + offsetof(Int8GemmArgs, configured)], 0);
  jne(configured, T_NEAR);
  ldtilecfg(ptr[rip + config_]);
  L(configured);
  if (desc_.n_tail) {
    mov(eax, (1u << desc_.n_tail) - 1);
    kmovw(k1, eax);
  }
  mov(a_, ptr[abi_arg + offsetof(Int8GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(Int8GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(Int8GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(Int8GemmArgs, k)]);
  mov(scale_, ptr[abi_arg + offsetof(Int8GemmArgs, a_scale)]);
  mov(a_stride_, std::int64_t{desc_.a_row_stride});
  mov(b_stride_, kTileBytes / kTileRows);
  mov(scratch_stride_, kTileBytes / kTileRows);
  sub(rsp, kScratchBytes);
  for (int i = 0; i < row_tiles_; ++i)
    for (int v = 0; v < column_tiles_; ++v) tilezero(c_tile(i, v));
}

// One k tile (64 k) a trip: A's and B's tiles and their products, and the prefetches ahead.
// The loop leaves b_ at the panel's compensations.
void AmxInt8GemmEmitter::k_loop() {
  const KernelDesc& d = desc_;
  Xbyak::Label loop;
  L(loop);
  for (int i = 0; i < row_tiles_; ++i) {
    tileloadd(Xbyak::Tmm(kFirstA + i), ptr[a_ + a_stride_ + i * kTileRows * static_cast<int>(d.a_row_stride)]);
    for (int v = 0; v < column_tiles_; ++v) {
      if (i == 0) tileloadd(Xbyak::Tmm(kFirstB + v), ptr[b_ + b_stride_ + v * kTileBytes]);
      tdpbusd(c_tile(i, v), Xbyak::Tmm(kFirstA + i), Xbyak::Tmm(kFirstB + v));
    }
  }
  const int b_step = static_cast<int>(d.b_k_stride) * kTileBytes;
  for (int line = 0; d.b_lookahead && line < b_step / 64; ++line)
    prefetcht0(ptr[b_ + static_cast<int>(d.b_lookahead) * b_step + line * 64]);
  for (int row = 0; d.a_lookahead && row < static_cast<int>(d.rows); ++row)
    prefetcht0(ptr[a_ + row * static_cast<int>(d.a_row_stride) + static_cast<int>(d.a_lookahead) * kKTile]);
  add(a_, kKTile);
  add(b_, b_step);
  dec(k_);
  jnz(loop, T_NEAR);
}

// The int32 tiles to the scratch block (tile 2i + v at 1 KiB each, rows of 64 bytes), then C =
// float(sum - compensation) * scale_w * scale_a (+ C with beta) row by row, the multiplications
// in the VNNI kernel's order; the last column tile masked to n_tail lanes.
void AmxInt8GemmEmitter::store_c() {
  const int tiles = static_cast<int>(desc_.b_k_stride);
  for (int i = 0; i < row_tiles_; ++i)
    for (int v = 0; v < column_tiles_; ++v)
      tilestored(ptr[rsp + scratch_stride_ + (2 * i + v) * kTileBytes], c_tile(i, v));
  const Xbyak::Zmm sum = zmm0, a_scale = zmm1;
  for (int r = 0; r < static_cast<int>(desc_.rows); ++r) {
    const int i = r / kTileRows;
    vbroadcastss(a_scale, ptr[scale_ + 4 * r]);
    for (int v = 0; v < column_tiles_; ++v) {
      const bool masked = desc_.n_tail != 0 && v == column_tiles_ - 1;
      vmovdqu32(sum, ptr[rsp + (2 * i + v) * kTileBytes + (r % kTileRows) * 64]);
      vpsubd(sum, sum, ptr[b_ + 64 * v]);  // compensations
      vcvtdq2ps(sum, sum);
      vmulps(sum, sum, ptr[b_ + 64 * tiles + 64 * v]);  // the columns' scales
      vmulps(sum, sum, a_scale);
      const Xbyak::Address at = ptr[c_ + 4 * r * static_cast<int>(desc_.c_row_stride) + 64 * v];
      if (desc_.beta) {
        if (masked) vaddps(sum | k1 | T_z, sum, at);
        else vaddps(sum, sum, at);
      }
      if (masked) vmovups(at | k1, sum);
      else vmovups(at, sum);
    }
  }
  add(rsp, kScratchBytes);
}

int AmxInt8GemmEmitter::tile_rows(int i) const {
  return std::min(kTileRows, static_cast<int>(desc_.rows) - i * kTileRows);
}

int AmxInt8GemmEmitter::tile_columns(int v) const {
  return v == column_tiles_ - 1 && desc_.n_tail ? desc_.n_tail : 16;
}

// The 64-byte tile configuration (palette 1): byte 0 the palette, bytes 16-47 each tile's
// bytes per row, bytes 48-63 its rows.
void AmxInt8GemmEmitter::emit_tile_config() {
  std::uint8_t config[64] = {};
  config[0] = 1;
  auto set = [&](int tile, int rows, int bytes_per_row) {
    config[16 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row & 0xff);
    config[17 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row >> 8);
    config[48 + tile] = static_cast<std::uint8_t>(rows);
  };
  for (int i = 0; i < row_tiles_; ++i) {
    set(kFirstA + i, tile_rows(i), kKTile);
    for (int v = 0; v < column_tiles_; ++v) set(2 * i + v, tile_rows(i), 4 * tile_columns(v));
  }
  for (int v = 0; v < column_tiles_; ++v) set(kFirstB + v, kTileRows, 4 * tile_columns(v));
  align(64);
  L(config_);
  for (std::uint8_t byte : config) db(byte);
}

}  // namespace rnnjit::x64
