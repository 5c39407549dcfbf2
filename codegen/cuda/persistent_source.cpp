#include "codegen/cuda/persistent_source.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/cuda/cuda_source.hpp"
#include "rnnjit/error.hpp"

namespace rnnjit::cuda {
namespace {

// Batch rows one warp item covers: each W_hh element read from shared memory feeds this many
// FMAs (and each h element G of them).
constexpr int kGroupRows = 4;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The gate kernels whose recurrence the persistent kernel can run: forward, over every unit, and
// not the reset-before GRU's two-part step (its n GEMM reads r * h_prev of the same step).
bool whole_forward_step(const KernelDesc& d) {
  return d.pass_kind() == Pass::forward && d.cell_kind() != CellKind::gru_reset_before && d.cols == d.hidden;
}

// The gate math's statements, indented for the kernel's item loop.
std::string indent(const std::string& statements) {
  std::string out;
  std::size_t begin = 0;
  while (begin < statements.size()) {
    const std::size_t end = std::min(statements.find('\n', begin), statements.size());
    out += "      " + statements.substr(begin, end - begin) + "\n";
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::optional<PersistentShape> persistent_shape(const KernelDesc& d, int sms, std::size_t shared_per_block,
                                                int lanes) {
  if (d.kind_of() != KernelKind::gate || d.isa_kind() != Isa::cuda || !whole_forward_step(d) || lanes < 1 ||
      d.rows < 1 || d.rows > kPersistentMaxRows || sms < 1)
    return std::nullopt;
  const int max_blocks = sms / lanes;
  if (max_blocks < 1) return std::nullopt;
  const int H = static_cast<int>(d.hidden), N = static_cast<int>(d.rows);
  // kPersistentMaxStepWork: where the kernel beats the step-by-step walk (cuBLAS's GEMM and a
  // gate launch a step). Each step every block reads all of h_{t-1} and its warps run N/4 items
  // per unit, so its step grows with N x H x U (U: units a block, H / SMs rounded up, for a
  // recurrence alone on the chip), while the walk's GEMM fills the chip better as N grows. On an
  // H200 (T=300, inference, rnnjit both ways in one run) the kernel was ahead at N x H x U up to
  // 179K (LSTM H=800 N=32, 0.90 of the walk's time; N=1: 0.54; RNN-tanh H=800 N=20: 0.66; LSTM
  // H=256 N=64: 0.80) and behind from 262K (LSTM H=1024 N=32: 1.04; H=800 N=64, GRU and RNN-tanh
  // too: 1.15-1.46).
  if (static_cast<std::int64_t>(N) * H * ceil_div(H, sms) > kPersistentMaxStepWork) return std::nullopt;
  PersistentShape s;
  s.units = ceil_div(H, max_blocks);
  s.blocks = ceil_div(H, s.units);
  s.group_rows = std::min(N, kGroupRows);
  s.threads = kPersistentThreads;
  const std::size_t w_bytes = static_cast<std::size_t>(d.gates()) * s.units * H * sizeof(float);
  const std::size_t row_bytes = static_cast<std::size_t>(H) * sizeof(float);
  if (w_bytes + s.group_rows * row_bytes > shared_per_block) return std::nullopt;
  const std::size_t room = (shared_per_block - w_bytes) / row_bytes;
  s.chunk_rows = static_cast<int>(std::min<std::size_t>(room, ceil_div(N, s.group_rows) * s.group_rows));
  s.chunk_rows = s.chunk_rows / s.group_rows * s.group_rows;
  s.shared_bytes = w_bytes + s.chunk_rows * row_bytes;
  return s;
}

std::vector<PersistentKernel> persistent_kernels(const Plan& plan, int sms, std::size_t shared_per_block) {
  const int lanes = most_lanes(plan);
  std::vector<PersistentKernel> out;
  for (std::size_t k = 0; k < plan.kernels.size(); ++k) {
    const KernelDesc& d = plan.kernels[k];
    if (const auto shape = persistent_shape(d, sms, shared_per_block, lanes))
      out.push_back({static_cast<int>(k), *shape, persistent_kernel_name(d, *shape), persistent_kernel_source(d, *shape)});
  }
  return out;
}

std::string persistent_kernel_name(const KernelDesc& d, const PersistentShape& s) {
  return fmt::format("{}_persistent_b{}_u{}_c{}", kernel_name(d), s.blocks, s.units, s.chunk_rows);
}

namespace {

// The pieces of the persistent kernel's source, in the order they stand in it.

// The kernel's one argument, laid out as codegen/kernel_args.hpp's PersistentForwardArgs.
constexpr const char* kArgsStruct = R"(struct PersistentForwardArgs {
  const float* w_hh; long long ld_w; const float* gx; long long gx_t; const float* bias_ih; const float* bias_hh;
  const float* peephole; const float* h_init; const float* c_init; float* h; long long h_t; float* c; long long c_t;
  float* gates; long long gates_t; unsigned* arrived; long long steps; long long reverse;
};
)";

// The kernel's name and shape, its constants, and W_hh's rows of the block's units copied into
// shared memory once, for every step.
std::string kernel_prologue(const KernelDesc& d, const PersistentShape& s) {
  return fmt::format(R"(// {describe}
// persistent: all steps in one launch of {blocks} blocks of {threads} threads (all resident); block b
// keeps the W_hh rows of hidden units [b * {U}, b * {U} + {U}) in shared memory and reads h_{{t-1}} in
// chunks of {chunk} rows; the blocks meet at a grid barrier after each step.
extern "C" __global__ void __launch_bounds__({threads}, 1) {name}(PersistentForwardArgs p) {{
  constexpr int H = {H}, G = {G}, U = {U}, N = {N}, CHUNK = {chunk}, GROUP = {group};
  constexpr int GH = {GH}, GX = {GX}, R = {R}, LDH = {LDH};
  constexpr float CLIP = {clip};  // LSTM cell clip, 0: none
  constexpr float ALPHA = {alpha};  // rnn_relu's leaky slope, 0: plain ReLU
  // h_{{t-1}}'s rows as float4 (when its address is 16-byte aligned too): every row starts at one.
  constexpr bool VEC = H % 4 == 0 && LDH % 4 == 0;
  (void)GH; (void)GX; (void)R; (void)LDH; (void)CLIP; (void)ALPHA;
  extern __shared__ float shared[];
  float* const w_s = shared;              // [G * U][H]: row g * U + u is gate g of unit u0 + u
  float* const h_s = shared + G * U * H;  // [CHUNK][H]: rows of h_{{t-1}}, zero past the batch
  const int u0 = blockIdx.x * U, units = H - u0 < U ? H - u0 : U;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int i = threadIdx.x; i < G * U * H; i += blockDim.x) {{
    const int g = i / (U * H), u = i / H % U, k = i % H;
    w_s[i] = u < units ? p.w_hh[(long long)(g * H + u0 + u) * p.ld_w + k] : 0.0f;
  }}
)",
                     fmt::arg("describe", describe(d)), fmt::arg("blocks", s.blocks), fmt::arg("threads", s.threads),
                     fmt::arg("U", s.units), fmt::arg("chunk", s.chunk_rows), fmt::arg("group", s.group_rows),
                     fmt::arg("name", persistent_kernel_name(d, s)), fmt::arg("H", d.hidden), fmt::arg("G", d.gates()),
                     fmt::arg("N", d.rows), fmt::arg("GH", d.gates() * d.hidden), fmt::arg("GX", d.gx_stride()),
                     fmt::arg("R", d.reserve_gates() * d.hidden), fmt::arg("LDH", d.ld_h),
                     fmt::arg("clip", fmt::format("{:a}f", d.clip())),
                     fmt::arg("alpha", fmt::format("{:a}f", d.relu_alpha())));
}

// The time loop opens: step s's operands, as the gate kernel's GateForwardArgs name them.
constexpr const char* kStepOperands = R"(  for (long long s = 0; s < p.steps; ++s) {
    const long long t = p.reverse ? p.steps - 1 - s : s, prev = p.reverse ? t + 1 : t - 1;
    GateForwardArgs a;
    a.gx = p.gx + t * p.gx_t;
    a.gh = nullptr;  // the pre-activations are gh_at's
    a.bias_ih = p.bias_ih;
    a.bias_hh = p.bias_hh;
    a.h_prev = s == 0 ? p.h_init : p.h + prev * p.h_t;
    a.c_prev = p.c_init ? (s == 0 ? p.c_init : p.c + prev * p.c_t) : nullptr;
    a.h_out = p.h + t * p.h_t;
    a.c_out = p.c ? p.c + t * p.c_t : nullptr;
    a.gates = p.gates ? p.gates + t * p.gates_t : nullptr;
    a.peephole = p.peephole;
)";

// Per chunk of batch rows: the rows of h_{t-1} into shared memory (through L2, 8 loads in flight
// per thread; float4 where the rows are 16-byte aligned).
constexpr const char* kChunkOfH = R"(    for (int n0 = 0; n0 < N; n0 += CHUNK) {
      const int rows = N - n0 < CHUNK ? N - n0 : CHUNK;
      const int groups = (rows + GROUP - 1) / GROUP;
      __syncthreads();  // the last chunk's items are done with h_s
      // Other blocks wrote h_{t-1}: read through L2 (ld.global.cg), never a stale L1 line; each
      // thread keeps 8 loads in flight (one at a time, L2's latency would be most of a step).
      const int count = groups * GROUP * H;  // the zero rows past the batch included
      if (VEC && (reinterpret_cast<unsigned long long>(a.h_prev) & 15) == 0) {
        for (int base = threadIdx.x; base < count / 4; base += 8 * blockDim.x) {
          float4 v[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const int i = base + q * blockDim.x, r = 4 * i / H, k = 4 * i % H;
            v[q] = i < count / 4 && r < rows
                       ? __ldcg(reinterpret_cast<const float4*>(a.h_prev + (long long)(n0 + r) * LDH + k))
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
#pragma unroll
          for (int q = 0; q < 8; ++q)
            if (base + q * blockDim.x < count / 4) reinterpret_cast<float4*>(h_s)[base + q * blockDim.x] = v[q];
        }
      } else {
        for (int base = threadIdx.x; base < count; base += 8 * blockDim.x) {
          float v[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const int i = base + q * blockDim.x, r = i / H, k = i % H;
            v[q] = i < count && r < rows ? __ldcg(a.h_prev + (long long)(n0 + r) * LDH + k) : 0.0f;
          }
#pragma unroll
          for (int q = 0; q < 8; ++q)
            if (base + q * blockDim.x < count) h_s[base + q * blockDim.x] = v[q];
        }
      }
      __syncthreads();
)";

// Each warp's items (a unit and a group of rows): the recurrent pre-activations of every gate as
// dot products over H split across its lanes, summed by a butterfly of shuffles; then one lane a
// row runs the forward gate kernel's cell math on them (the step's h_t, c_t, gates).
std::string warp_items(const KernelDesc& d) {
  return R"(      for (int item = warp; item < units * groups; item += warps) {
        const int u = item % units, r0 = item / units * GROUP;
        float acc[G][GROUP];
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int b = 0; b < GROUP; ++b) acc[g][b] = 0.0f;
#pragma unroll 4
        for (int k = lane; k < H; k += 32) {
          float w[G], x[GROUP];
#pragma unroll
          for (int g = 0; g < G; ++g) w[g] = w_s[(g * U + u) * H + k];
#pragma unroll
          for (int b = 0; b < GROUP; ++b) x[b] = h_s[(r0 + b) * H + k];
#pragma unroll
          for (int g = 0; g < G; ++g)
#pragma unroll
            for (int b = 0; b < GROUP; ++b) acc[g][b] = fmaf(w[g], x[b], acc[g][b]);
        }
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int b = 0; b < GROUP; ++b)
#pragma unroll
            for (int m = 16; m > 0; m /= 2) acc[g][b] += __shfl_xor_sync(0xffffffffu, acc[g][b], m);
        if (lane < GROUP && r0 + lane < rows) {  // lane b runs the cell of row r0 + b
          float gh[G];
#pragma unroll
          for (int g = 0; g < G; ++g) {
            gh[g] = acc[g][0];
#pragma unroll
            for (int b = 1; b < GROUP; ++b) gh[g] = lane == b ? acc[g][b] : gh[g];
          }
          const int row = n0 + r0 + lane, j = u0 + u;
          const auto gh_at = [&](int g) { return gh[g]; };
)" + indent(forward_gate_math(d)) + R"(        }
      }
)";
}

// The chunk loop closes, and the step ends at the grid barrier; the time loop and kernel close.
constexpr const char* kGridBarrier = R"(    }
    if (s + 1 == p.steps) break;
    // The grid barrier: every block's h_t written (and made visible device-wide) before any
    // block reads it. The counter only grows: step s is done at (s + 1) * gridDim.x arrivals.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      atomicAdd(p.arrived, 1u);
      const unsigned everyone = (unsigned)(s + 1) * gridDim.x;
      while (*(volatile unsigned*)p.arrived < everyone) {
      }
      __threadfence();
    }
    __syncthreads();
  }
}
)";

}  // namespace

std::string persistent_kernel_source(const KernelDesc& d, const PersistentShape& s) {
  check_gate_desc(d);
  const int H = static_cast<int>(d.hidden);
  if (!whole_forward_step(d))
    throw Error(fmt::format("{}: no persistent kernel (forward kernels over every unit, not the reset-before GRU)",
                            kernel_name(d)));
  if (s.units < 1 || s.blocks != ceil_div(H, s.units) || s.group_rows < 1 || s.chunk_rows < s.group_rows ||
      s.chunk_rows % s.group_rows || s.threads < 32 || s.threads % 32 ||
      s.shared_bytes != (static_cast<std::size_t>(d.gates()) * s.units + s.chunk_rows) * H * sizeof(float))
    throw Error(fmt::format("{}: invalid persistent shape", kernel_name(d)));
  return std::string(cell_math_prelude()) + "\n" + kArgsStruct + kernel_prologue(d, s) + gate_clip_setup(d) +
         kStepOperands + kChunkOfH + warp_items(d) + kGridBarrier;
}

}  // namespace rnnjit::cuda
