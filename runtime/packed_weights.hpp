// rnnjit: the caller's packed-weights buffer (ForwardIo::packed_weights, cuDNN's "weight
// space"): a small header, then the plan's packed panels from the first 64-byte boundary after
// it. So that
//   - the panels are 64-byte aligned whatever the buffer's own alignment: a std::vector<std::byte>
//     is 16-byte aligned, and the GEMMs' B vectors would then each straddle two cache lines
//     (the DS2-sized steps ran 3-7% slower on such a buffer);
//   - a buffer that pack_weights never wrote, or wrote for a plan with another layout, is refused
//     with an Error instead of being multiplied as weights.
// The header records where the panels start, so a copy of a packed buffer (to any alignment)
// still reads right.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rnnjit {

struct Plan;

// Header and the most padding up to the 64-byte boundary: the buffer is this much larger than
// the plan's panels.
inline constexpr std::size_t kPackedWeightsOverhead = 128;

// What the header stores to name the layout: the pack steps' shapes and panel widths, their
// places in the buffer and the GEMMs' number format (not the thread count, tiles or caches,
// which do not change the layout).
std::uint64_t packed_layout_fingerprint(const Plan& plan);

// Writes the header into `buffer` (panel_bytes + kPackedWeightsOverhead bytes) and returns
// where the panels go.
std::byte* start_packed_weights(std::span<std::byte> buffer, std::size_t panel_bytes, std::uint64_t fingerprint);

// The panels of a buffer start_packed_weights wrote for this layout; throws Error otherwise.
const std::byte* packed_panels(std::span<const std::byte> buffer, std::size_t panel_bytes, std::uint64_t fingerprint);

}  // namespace rnnjit
