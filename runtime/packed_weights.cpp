#include "runtime/packed_weights.hpp"

#include <cstring>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "codegen/fnv1a.hpp"
#include "codegen/plan.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit {
namespace {

// Bumped whenever the packing of panels changes for unchanged pack steps.
// 2: panels that a step's thread boundaries cut hold their parts one after another.
constexpr std::uint32_t kPackedLayoutVersion = 2;
constexpr char kMagic[8] = {'r', 'n', 'n', 'j', 'i', 't', 'P', 'W'};

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t panels_offset;  // bytes from the buffer's start
  std::uint64_t fingerprint;
};
static_assert(sizeof(Header) == 24 && std::is_trivially_copyable_v<Header>);
static_assert(sizeof(Header) + kRegionAlignment - 1 <= kPackedWeightsOverhead);

}  // namespace

std::uint64_t packed_layout_fingerprint(const Plan& plan) {
  Fnv1a h;
  h.add(plan.workspace.packed_bytes);
  h.add(static_cast<std::uint64_t>(plan.fpmath));
  // The units' panels are alike; the tiles differ (and so do their blockings, hashed below).
  if (plan.fpmath == FpMath::bf16 && plan.bf16_unit != Bf16Unit::amx) h.add(static_cast<std::uint64_t>(plan.bf16_unit));
  // int8 panels (their weights quantized, with compensations and scales) are unlike either.
  if (plan.quantize != Quantize::none) h.add(0x1000 + static_cast<std::uint64_t>(plan.int8_unit));
  for (const Stage& stage : plan.pack_weights)
    for (const auto& lane : stage.lanes)
      for (const Step& step : lane) {
        const auto* p = std::get_if<PackStep>(&step);
        if (!p) continue;
        const std::size_t dst = p->dst.region >= 0
                                    ? plan.workspace.regions[static_cast<std::size_t>(p->dst.region)].offset
                                    : 0;
        for (std::int64_t v : {static_cast<std::int64_t>(p->src.buffer), p->src.offset, static_cast<std::int64_t>(dst),
                               p->dst.offset, p->k, p->groups, p->blocking.n_r, p->blocking.group,
                               std::int64_t{p->blocking.bf16}, std::int64_t{p->transpose}, p->ld, p->sequences})
          h.add(static_cast<std::uint64_t>(v));
        for (std::int64_t cut : p->blocking.cuts()) h.add(static_cast<std::uint64_t>(cut));
      }
  return h.value();
}

std::byte* start_packed_weights(std::span<std::byte> buffer, std::size_t panel_bytes, std::uint64_t fingerprint) {
  const auto start = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::uintptr_t panels = align_to_region(start + sizeof(Header));
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kPackedLayoutVersion;
  h.panels_offset = static_cast<std::uint32_t>(panels - start);
  h.fingerprint = fingerprint;
  if (buffer.size() < h.panels_offset + panel_bytes)  // the callers size it: a bug, not bad input
    throw Error(fmt::format("packed weights buffer of {} bytes cannot hold {} bytes of panels", buffer.size(), panel_bytes));
  std::memcpy(buffer.data(), &h, sizeof h);
  return buffer.data() + h.panels_offset;
}

const std::byte* packed_panels(std::span<const std::byte> buffer, std::size_t panel_bytes, std::uint64_t fingerprint) {
  Header h{};
  if (buffer.size() >= sizeof h) std::memcpy(&h, buffer.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    throw Error("packed_weights were not written by pack_weights (no rnnjit header at their start)");
  if (h.version != kPackedLayoutVersion || h.fingerprint != fingerprint)
    throw Error("packed_weights were packed for another plan's layout: pack them with this Execution's pack_weights");
  if (h.panels_offset < sizeof h || h.panels_offset > kPackedWeightsOverhead ||
      h.panels_offset + panel_bytes > buffer.size())
    throw Error(fmt::format("packed_weights header is corrupt (panels at byte {} of {})", h.panels_offset, buffer.size()));
  return buffer.data() + h.panels_offset;
}

}  // namespace rnnjit
