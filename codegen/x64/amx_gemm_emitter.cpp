#include "codegen/x64/amx_gemm_emitter.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/kernel_args.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::x64 {
namespace {

constexpr int kTileRows = 16;      // rows of every tile (A, C: matrix rows; B: pairs of k)
constexpr int kTileBytes = 1024;   // one packed B tile: 16 k pairs x 16 columns x 2 bf16
constexpr int kKTile = 32;         // k per tile step (64 bytes of bf16 per A row)
constexpr int kFirstA = 4, kFirstB = 6;

}  // namespace

AmxGemmEmitter::AmxGemmEmitter(const KernelDesc& d) : JitGenerator(4096), desc_(d) {
  check_desc();
  row_tiles_ = (static_cast<int>(d.rows) + kTileRows - 1) / kTileRows;
  column_tiles_ = d.vectors;
  load_args();
  k_loop();
  for (int i = 0; i < row_tiles_; ++i)
    for (int v = 0; v < column_tiles_; ++v) tilestored(c_at(i, v), c_tile(i, v));
  // The tiles stay configured: a tilerelease here halved the rate of a one-shot GEMM's many
  // calls. The executor releases them after each stage (Executor::run).
  ret();
  text_size_ = getSize();
  emit_tile_config();
  finalize();
}

void AmxGemmEmitter::check_desc() const {
  const KernelDesc& d = desc_;
  const std::string name = kernel_name(d);
  if (d.kind_of() != KernelKind::amx_gemm || d.isa_kind() != Isa::avx512)
    throw Error(fmt::format("{}: not an AMX GEMM descriptor", name));
  if (d.rows < 1 || d.rows > 2 * kTileRows || d.vectors < 1 || d.vectors > 2 || d.n_tail > 15 ||
      d.b_k_stride < d.vectors || d.b_k_stride > 2 || d.b_lookahead > 16 || d.a_lookahead > 16)
    throw Error(fmt::format(
        "{}: an AMX tile block has 1-32 rows, 1-2 column tiles of a panel of 1-2 (b_k_stride), n_tail < 16, "
        "b_lookahead <= 16 and a_lookahead <= 16",
        name));
  if (d.a_row_stride % kKTile != 0 || d.a_row_stride == 0 || d.c_row_stride == 0)
    throw Error(fmt::format("{}: A's row stride must be a positive multiple of {} and C's positive", name, kKTile));
  // The farthest displacements: A's last row (prefetched d.a_lookahead k steps on), C's second row tile.
  const std::int64_t a_reach = 2 * kTileRows * 2 * std::int64_t{d.a_row_stride} + d.a_lookahead * kKTile * 2;
  const std::int64_t reach = std::max<std::int64_t>(a_reach, kTileRows * 4 * std::int64_t{d.c_row_stride});
  if (reach > std::numeric_limits<std::int32_t>::max())
    throw Error(fmt::format("{}: strides too large for 32-bit displacements", name));
}

Xbyak::Tmm AmxGemmEmitter::c_tile(int i, int v) const { return Xbyak::Tmm(2 * i + v); }

Xbyak::Address AmxGemmEmitter::c_at(int i, int v) const {
  return ptr[c_ + c_stride_ + (i * kTileRows * static_cast<int>(desc_.c_row_stride) + v * 16) * 4];
}

// The tile configuration (once per thread: GemmArgs::configured), the pointers, k and the
// strides from the argument struct, and C's tiles loaded (beta 1) or zeroed.
void AmxGemmEmitter::load_args() {
  const KernelDesc& d = desc_;
  Xbyak::Label configured;
  cmp(qword[abi_arg + offsetof(GemmArgs, configured)], 0);
  jne(configured, T_NEAR);
  ldtilecfg(ptr[rip + config_]);
  L(configured);
  mov(a_, ptr[abi_arg + offsetof(GemmArgs, a)]);
  mov(b_, ptr[abi_arg + offsetof(GemmArgs, b)]);
  mov(c_, ptr[abi_arg + offsetof(GemmArgs, c)]);
  mov(k_, ptr[abi_arg + offsetof(GemmArgs, k)]);
  mov(a_stride_, 2 * std::int64_t{d.a_row_stride});
  mov(b_stride_, kTileBytes / kTileRows);
  mov(c_stride_, 4 * std::int64_t{d.c_row_stride});
  for (int i = 0; i < row_tiles_; ++i)
    for (int v = 0; v < column_tiles_; ++v) {
      if (d.beta) tileloadd(c_tile(i, v), c_at(i, v));
      else tilezero(c_tile(i, v));
    }
}

// One k tile (32 k) a trip: A's and B's tiles and their products, and the prefetches ahead.
void AmxGemmEmitter::k_loop() {
  const KernelDesc& d = desc_;
  Xbyak::Label loop;
  L(loop);
  // Each product follows the loads it needs, so loads of the next tiles overlap the products
  // of the ones loaded (A0 B0 C00, B1 C01, A1 C10 C11).
  for (int i = 0; i < row_tiles_; ++i) {
    tileloadd(Xbyak::Tmm(kFirstA + i), ptr[a_ + a_stride_ + i * kTileRows * 2 * static_cast<int>(d.a_row_stride)]);
    for (int v = 0; v < column_tiles_; ++v) {
      if (i == 0) tileloadd(Xbyak::Tmm(kFirstB + v), ptr[b_ + b_stride_ + v * kTileBytes]);
      tdpbf16ps(c_tile(i, v), Xbyak::Tmm(kFirstA + i), Xbyak::Tmm(kFirstB + v));
    }
  }
  // B streams from L3 in a recurrence: its tiles b_lookahead k steps on are fetched into L1 now
  // (past the panel's end, the next panel's first ones, which this thread takes next).
  const int b_step = static_cast<int>(d.b_k_stride) * kTileBytes;
  for (int line = 0; d.b_lookahead && line < b_step / 64; ++line)
    prefetcht0(ptr[b_ + static_cast<int>(d.b_lookahead) * b_step + line * 64]);
  // A's rows (a line each per k step) as many k steps on, where A streams from L2.
  for (int row = 0; d.a_lookahead && row < static_cast<int>(d.rows); ++row)
    prefetcht0(ptr[a_ + row * 2 * static_cast<int>(d.a_row_stride) + static_cast<int>(d.a_lookahead) * kKTile * 2]);
  add(a_, kKTile * 2);
  add(b_, b_step);
  dec(k_);
  jnz(loop, T_NEAR);
}

int AmxGemmEmitter::tile_rows(int i) const {
  return std::min(kTileRows, static_cast<int>(desc_.rows) - i * kTileRows);
}

int AmxGemmEmitter::tile_columns(int v) const {
  return v == column_tiles_ - 1 && desc_.n_tail ? desc_.n_tail : 16;
}

// The 64-byte tile configuration (palette 1): byte 0 the palette, bytes 16-47 each tile's
// bytes per row, bytes 48-63 its rows.
void AmxGemmEmitter::emit_tile_config() {
  std::uint8_t config[64] = {};
  config[0] = 1;
  auto set = [&](int tile, int rows, int bytes_per_row) {
    config[16 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row & 0xff);
    config[17 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row >> 8);
    config[48 + tile] = static_cast<std::uint8_t>(rows);
  };
  for (int i = 0; i < row_tiles_; ++i) {
    set(kFirstA + i, tile_rows(i), 2 * kKTile);
    for (int v = 0; v < column_tiles_; ++v) set(2 * i + v, tile_rows(i), 4 * tile_columns(v));
  }
  for (int v = 0; v < column_tiles_; ++v) set(kFirstB + v, kTileRows, 4 * tile_columns(v));
  align(64);
  L(config_);
  for (std::uint8_t byte : config) db(byte);
}

}  // namespace rnnjit::x64
