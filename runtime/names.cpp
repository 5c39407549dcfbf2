// rnnjit: names of the API's enums, their parsers, and ISA detection.
#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <fmt/format.h>
#include <xbyak/xbyak_util.h>

#include "codegen/int8_unit.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit {

std::string_view to_string(Mode mode) { return mode == Mode::training ? "training" : "inference"; }

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::automatic: return "auto";
    case Backend::reference: return "reference";
    case Backend::jit: return "jit";
  }
  return "unknown";
}

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::reference: return "reference";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::cuda: return "cuda";
    case Isa::detect: return "detect";
  }
  return "unknown";
}

Mode parse_mode(std::string_view name) {
  if (name == "infer" || name == "inference") return Mode::inference;
  if (name == "train" || name == "training") return Mode::training;
  throw Error(fmt::format("unknown mode '{}' (expected infer or train)", name));
}

Backend parse_backend(std::string_view name) {
  for (Backend b : {Backend::automatic, Backend::reference, Backend::jit})
    if (name == to_string(b)) return b;
  throw Error(fmt::format("unknown backend '{}' (expected auto, reference or jit)", name));
}

Isa parse_isa(std::string_view name) {
  for (Isa i : {Isa::reference, Isa::avx2, Isa::avx512})
    if (name == to_string(i)) return i;
  throw Error(fmt::format("unknown isa '{}' (expected avx512, avx2 or reference)", name));
}

std::string_view to_string(ProjectionGemm gemm) {
  switch (gemm) {
    case ProjectionGemm::generated: return "generated";
    case ProjectionGemm::openblas: return "openblas";
    case ProjectionGemm::measured: return "measured";
  }
  return "?";
}

ProjectionGemm parse_projection_gemm(std::string_view name) {
  for (ProjectionGemm g : {ProjectionGemm::generated, ProjectionGemm::openblas, ProjectionGemm::measured})
    if (name == to_string(g)) return g;
  throw Error(fmt::format("unknown projection GEMM '{}' (expected generated, openblas or measured)", name));
}

std::string_view to_string(FpMath math) { return math == FpMath::bf16 ? "bf16" : "strict"; }

FpMath parse_fpmath(std::string_view name) {
  for (FpMath m : {FpMath::strict, FpMath::bf16})
    if (name == to_string(m)) return m;
  throw Error(fmt::format("unknown fpmath '{}' (expected strict or bf16)", name));
}

namespace {

// Whether this process may use the AMX tile registers, asked of the OS once: Linux hands out the
// 8 KiB tile data state only to processes that request it (kernel 5.16+). Called only where the
// CPU has AMX tiles.
bool amx_tiles_permitted() {
  static const bool permitted = [] {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return permitted;
}

}  // namespace

bool amx_bf16_usable() {
  static const bool usable = [] {
    const Xbyak::util::Cpu cpu;
    using C = Xbyak::util::Cpu;
    return cpu.has(C::tAMX_TILE) && cpu.has(C::tAMX_BF16) && amx_tiles_permitted();
  }();
  return usable;
}

bool avx512_bf16_usable() {
  const Xbyak::util::Cpu cpu;
  return cpu_isa() == Isa::avx512 && cpu.has(Xbyak::util::Cpu::tAVX512_BF16);
}

std::string_view to_string(Bf16Unit unit) { return unit == Bf16Unit::amx ? "amx" : "avx512_bf16"; }

Bf16Unit parse_bf16_unit(std::string_view name) {
  for (Bf16Unit u : {Bf16Unit::amx, Bf16Unit::avx512_bf16})
    if (name == to_string(u)) return u;
  throw Error(fmt::format("unknown bf16 unit '{}' (expected amx or avx512_bf16)", name));
}

std::optional<Bf16Unit> bf16_unit() {
  const char* forced = std::getenv("RNNJIT_BF16_UNIT");
  if (forced && *forced) {
    const Bf16Unit unit = parse_bf16_unit(forced);
    if (unit == Bf16Unit::amx ? !amx_bf16_usable() : !avx512_bf16_usable())
      throw Error(fmt::format("RNNJIT_BF16_UNIT={} but this CPU (or OS) does not run it", forced));
    return unit;
  }
  if (amx_bf16_usable()) return Bf16Unit::amx;
  // AMD's cores (Zen 4, Zen 5) run vdpbf16ps at their FMA rate, twice FP32's products an
  // instruction; an Intel core measured one every 2 cycles against vfmadd231ps's 2 a cycle
  // (a Sapphire Rapids whose AMX was not used: the DS2 LSTM ran 0.62x as fast as with FP32).
  if (avx512_bf16_usable() && Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAMD)) return Bf16Unit::avx512_bf16;
  return std::nullopt;
}

std::string_view to_string(Quantize q) { return q == Quantize::int8_dynamic ? "int8_dynamic" : "none"; }

Quantize parse_quantize(std::string_view name) {
  if (name == "int8") return Quantize::int8_dynamic;
  for (Quantize q : {Quantize::none, Quantize::int8_dynamic})
    if (name == to_string(q)) return q;
  throw Error(fmt::format("unknown quantize '{}' (expected none, int8 or int8_dynamic)", name));
}

std::string_view to_string(Int8Unit unit) {
  switch (unit) {
    case Int8Unit::amx: return "amx";
    case Int8Unit::avx_vnni: return "avx_vnni";
    case Int8Unit::avx2: return "avx2";
    default: return "avx512_vnni";
  }
}

Int8Unit parse_int8_unit(std::string_view name) {
  for (Int8Unit u : {Int8Unit::avx512_vnni, Int8Unit::amx, Int8Unit::avx_vnni, Int8Unit::avx2})
    if (name == to_string(u)) return u;
  throw Error(fmt::format("unknown int8 unit '{}' (expected amx, avx512_vnni, avx_vnni or avx2)", name));
}

bool amx_int8_usable() {
  static const bool usable = [] {
    const Xbyak::util::Cpu cpu;
    using C = Xbyak::util::Cpu;
    return cpu_isa() == Isa::avx512 && cpu.has(C::tAMX_TILE) && cpu.has(C::tAMX_INT8) && amx_tiles_permitted();
  }();
  return usable;
}

bool avx512_vnni_usable() {
  return cpu_isa() == Isa::avx512 && Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAVX512_VNNI);
}

bool avx_vnni_usable() {
  return cpu_isa() != Isa::reference && Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAVX_VNNI);
}

bool int8_unit_usable(Int8Unit unit) {
  switch (unit) {
    case Int8Unit::amx: return amx_int8_usable();
    case Int8Unit::avx512_vnni: return avx512_vnni_usable();
    case Int8Unit::avx_vnni: return avx_vnni_usable();
    case Int8Unit::avx2: return cpu_isa() != Isa::reference;  // AVX2 and FMA
  }
  return false;
}

std::optional<Int8Unit> int8_unit(Isa isa) {
  const char* forced = std::getenv("RNNJIT_INT8_UNIT");
  if (forced && *forced) {
    Int8Unit unit{};
    try {
      unit = parse_int8_unit(forced);
    } catch (const Error& e) {
      throw Error(fmt::format("RNNJIT_INT8_UNIT: {}", e.what()));
    }
    if (!int8_unit_usable(unit))
      throw Error(fmt::format("RNNJIT_INT8_UNIT={} but this CPU (or OS) does not run it", forced));
    return unit;
  }
  for (Int8Unit unit : {Int8Unit::amx, Int8Unit::avx512_vnni, Int8Unit::avx_vnni, Int8Unit::avx2})
    if ((isa == Isa::avx512 || int8_kernel_isa(unit) == Isa::avx2) && int8_unit_usable(unit)) return unit;
  return std::nullopt;
}

Isa cpu_isa() {
  static const Isa best = [] {
    const Xbyak::util::Cpu cpu;
    using C = Xbyak::util::Cpu;
    if (cpu.has(C::tAVX512F) && cpu.has(C::tAVX512DQ) && cpu.has(C::tAVX512BW) && cpu.has(C::tAVX512VL)) return Isa::avx512;
    if (cpu.has(C::tAVX2) && cpu.has(C::tFMA)) return Isa::avx2;
    return Isa::reference;
  }();
  return best;
}

Isa detect_isa() {
  const char* forced = std::getenv("RNNJIT_ISA");
  if (!forced || !*forced) return cpu_isa();
  const Isa isa = parse_isa(forced);
  if (static_cast<int>(isa) > static_cast<int>(cpu_isa()))
    throw Error(fmt::format("RNNJIT_ISA={} but this CPU only runs {}", forced, to_string(cpu_isa())));
  return isa;
}

}  // namespace rnnjit
