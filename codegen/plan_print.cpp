// rnnjit: the Plan as human text and as JSON (one document).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "codegen/plan.hpp"

namespace rnnjit {
namespace {

template <class... F> struct Overloaded : F... { using F::operator()...; };
template <class... F> Overloaded(F...) -> Overloaded<F...>;

std::string operand_text(const Plan& p, const Operand& o) {
  if (o.buffer == Buffer::none) return "zeros";
  if (o.region >= 0) return fmt::format("{}+{}", p.workspace.regions[static_cast<std::size_t>(o.region)].name, o.offset);
  return fmt::format("{}+{}", to_string(o.buffer), o.offset);
}

nlohmann::json operand_json(const Plan& p, const Operand& o) {
  nlohmann::json j{{"buffer", std::string(to_string(o.buffer))}, {"offset", o.offset}};
  if (o.region >= 0) j["region"] = p.workspace.regions[static_cast<std::size_t>(o.region)].name;
  return j;
}

// The engine of an int8 GEMM in plan texts ('-') and JSON ('_'): amx-int8, avx512-vnni,
// avx-vnni, avx2-int8.
std::string int8_engine(Int8Unit unit, char sep) {
  switch (unit) {
    case Int8Unit::amx: return fmt::format("amx{}int8", sep);
    case Int8Unit::avx_vnni: return fmt::format("avx{}vnni{}", sep, sep == '_' ? "_int8" : "");
    case Int8Unit::avx2: return fmt::format("avx2{}int8", sep);
    default: return sep == '_' ? "vnni_int8" : "avx512-vnni";
  }
}

std::string blocking_text(const GemmBlocking& b) {
  if (!b.generated()) return "openblas";
  if (b.int8)
    return fmt::format("{} m_r={} n_r={} group={} threads={} packed int8 B (a scale per column), A quantized "
                       "to uint8 per row ({} cop{})",
                       int8_engine(b.int8_unit, '-'), b.m_r, b.n_r, b.group, b.threads, b.a_copies, b.a_copies == 1 ? "y" : "ies");
  if (b.bf16)
    return fmt::format("{} m_r={} n_r={} group={} threads={} packed bf16 B, A rounded to bf16 ({} cop{})",
                       b.bf16_unit == Bf16Unit::amx ? "amx-bf16" : "avx512-bf16", b.m_r, b.n_r, b.group, b.threads,
                       b.a_copies, b.a_copies == 1 ? "y" : "ies");
  const std::vector<std::int64_t> cuts = b.cuts();
  return fmt::format("generated m_r={} n_r={} k_c={} group={} threads={}{}{}{}", b.m_r, b.n_r, b.k_c, b.group,
                     b.threads, b.packed_b ? " packed B" : "", b.pack_a ? " packed A^T" : "",
                     cuts.empty() ? "" : fmt::format(", panels cut between threads at column {}", fmt::join(cuts, ", ")));
}

nlohmann::json blocking_json(const Plan& p, const GemmBlocking& b) {
  if (!b.generated()) return {{"engine", "openblas"}};
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& r : b.kernels)
    for (const auto& c : r)
      for (int k : c)
        if (k >= 0) kernels.push_back(kernel_name(p.kernels[static_cast<std::size_t>(k)]));
  for (const auto& part : b.part_kernels)
    for (const auto& r : part.kernels)
      for (int k : r)
        if (k >= 0) kernels.push_back(kernel_name(p.kernels[static_cast<std::size_t>(k)]));
  return {{"engine", b.int8 ? int8_engine(b.int8_unit, '_') : b.bf16 ? "amx_bf16" : "generated"}, {"m_r", b.m_r}, {"n_r", b.n_r}, {"k_c", b.k_c}, {"group", b.group},
          {"threads", b.threads}, {"packed_b", b.packed_b}, {"pack_a", b.pack_a}, {"cuts", b.cuts()},
          {"kernels", kernels}};
}

std::string gemm_text(const Plan& p, const GemmStep& g) {
  const VariableLengths& f = g.finished;
  std::string skips = f.rows_skipped ? ", skips the rows of finished sequences (variable lengths)" : "";
  if (f.k_rows_skipped)
    skips += f.b_masked.buffer != Buffer::none
                 ? fmt::format(", sums no K row of a finished sequence (variable lengths: B masked into {})",
                               operand_text(p, f.b_masked))
                 : std::string(", sums no K row of a finished sequence (variable lengths)");
  if (g.h0.block.rows > 0)
    skips += fmt::format(", leaves out K's {} {} rows where h0 ({}) is all zeros", g.h0.last ? "last" : "first",
                         g.h0.block.rows, operand_text(p, g.h0.block.at));
  if (g.a_panels_use == GemmStep::APanels::keep_for_next)
    skips += fmt::format(", A packed for all of K into {} and kept for the next GEMM", operand_text(p, g.a_panels));
  else if (g.a_panels_use == GemmStep::APanels::packed_before)
    skips += fmt::format(", A's panels as the last GEMM packed them into {}", operand_text(p, g.a_panels));
  return fmt::format("gemm {}: C[{}x{}] {}= A{}[lda {}] * B{}[ldb {}], K={}, A={} B={} C={} ldc={} ({}){}", g.what,
                     g.m, g.n, g.beta != 0.0f ? "+" : "", g.trans_a ? "^T" : "", g.lda, g.trans_b ? "^T" : "", g.ldb,
                     g.k, g.a.buffer == Buffer::none ? "per step" : operand_text(p, g.a), operand_text(p, g.b),
                     operand_text(p, g.c), g.ldc, blocking_text(g.blocking), skips);
}

nlohmann::json gemm_json(const Plan& p, const GemmStep& g) {
  return {{"kind", "gemm"}, {"what", g.what}, {"trans_a", g.trans_a}, {"trans_b", g.trans_b}, {"m", g.m}, {"n", g.n},
          {"k", g.k}, {"a", operand_json(p, g.a)}, {"b", operand_json(p, g.b)}, {"c", operand_json(p, g.c)},
          {"lda", g.lda}, {"ldb", g.ldb}, {"ldc", g.ldc}, {"beta", g.beta}, {"blocking", blocking_json(p, g.blocking)},
          {"finished_rows_skipped", g.finished.rows_skipped}, {"finished_k_rows_skipped", g.finished.k_rows_skipped},
          {"sequences", g.finished.sequences}, {"b_masked", operand_json(p, g.finished.b_masked)},
          {"h0", operand_json(p, g.h0.block.at)}, {"h0_rows", g.h0.block.rows}, {"h0_rows_last", g.h0.last},
          {"a_panels", operand_json(p, g.a_panels)},
          {"a_panels_use", g.a_panels_use == GemmStep::APanels::keep_for_next   ? "keep_for_next"
                           : g.a_panels_use == GemmStep::APanels::packed_before ? "packed_before"
                                                                                : "per_k_block"}};
}

// The kernels of a gate kernel's threads, by name ("idle" for a thread without one).
std::string thread_kernels_text(const Plan& p, const GateSplit& split) {
  std::string kernels;
  for (int k : split.thread_kernels)
    kernels += (kernels.empty() ? "" : ", ") +
               (k < 0 ? std::string("idle") : kernel_name(p.kernels[static_cast<std::size_t>(k)]));
  return kernels;
}

std::string recurrence_text(const Plan& p, const RecurrenceStep& r) {
  std::string part;  // the step's second GEMM (and kernels), where it has one
  if (r.projection && r.pass == Pass::forward)
    part = " ; after the gate kernels: " + gemm_text(p, r.projection->gemm);
  if (r.projection && r.pass == Pass::backward)
    part = " ; before the gate kernels: " + gemm_text(p, r.projection->gemm);
  if (r.reset_before)
    part = " ; after the gate kernels and a barrier: " + gemm_text(p, r.reset_before->gemm) +
           " ; n kernels per thread: " + thread_kernels_text(p, r.reset_before->part1);
  return fmt::format("loop {}: {} steps{}, per step: {} ; gate kernels per thread: {}{}", r.what, r.steps,
                     r.reverse ? " (t = T-1..0)" : "", gemm_text(p, r.gemm), thread_kernels_text(p, r.gate), part);
}

std::string step_text(const Plan& p, const Step& step) {
  return std::visit(
      Overloaded{
          [&](const GemmStep& g) { return gemm_text(p, g); },
          [&](const CopyStep& c) {
            const std::string blocks =
                c.blocks > 1 ? fmt::format(" x{} blocks (strides {} -> {})", c.blocks, c.block_src, c.block_dst) : "";
            const std::string plus = c.plus.buffer == Buffer::none ? "" : " + " + operand_text(p, c.plus);
            return fmt::format("copy {}: [{}x{}]{} {}{} (ld {}) -> {} (ld {})", c.what, c.rows, c.cols, blocks,
                               operand_text(p, c.src), plus, c.ld_src, operand_text(p, c.dst), c.ld_dst);
          },
          [&](const MaskStep& m) {
            return fmt::format("mask {}: rows (t, n) with t >= length[n] of [{}x{}x{}] {} (strides t {} n {}) <- 0",
                               m.what, m.steps, m.batch, m.cols, operand_text(p, m.dst), m.t_stride, m.n_stride);
          },
          [&](const DropoutStep& d) {
            return fmt::format("dropout {}: p={} {} elements, {} mask {}", d.what, d.p, d.elements,
                               d.pass == Pass::forward ? operand_text(p, d.src) + " -> " + operand_text(p, d.dst)
                                                       : operand_text(p, d.dst) + " in place,",
                               p.workspace.regions[static_cast<std::size_t>(d.mask_region)].name);
          },
          [&](const ColumnSumStep& c) {
            const std::string factor = c.factor.buffer == Buffer::none
                                           ? std::string()
                                           : fmt::format(" times {} (ld {})", operand_text(p, c.factor), c.ld_factor);
            const std::string also =
                c.also_dst.buffer == Buffer::none ? std::string() : " and " + operand_text(p, c.also_dst);
            return fmt::format("colsum {}: [{}x{}] {} (ld {}){} -> {}{}", c.what, c.rows, c.cols, operand_text(p, c.src),
                               c.ld_src, factor, operand_text(p, c.dst), also);
          },
          [&](const RecurrenceStep& r) { return recurrence_text(p, r); },
          [&](const PackStep& k) {
            return fmt::format("pack {}: W[{}x{}] {} -> B panels {} ({}){}", k.what, k.groups * k.blocking.group, k.k,
                               operand_text(p, k.src), operand_text(p, k.dst), blocking_text(k.blocking),
                               k.sequences > 0 ? ", rows of finished sequences as zeros (variable lengths)" : "");
          }},
      step);
}

nlohmann::json column_sum_json(const Plan& p, const ColumnSumStep& c) {
  nlohmann::json j{{"kind", "column_sum"}, {"what", c.what}, {"src", operand_json(p, c.src)},
                   {"dst", operand_json(p, c.dst)}, {"rows", c.rows}, {"cols", c.cols}, {"ld_src", c.ld_src}};
  if (c.factor.buffer != Buffer::none) {
    j["factor"] = operand_json(p, c.factor);
    j["ld_factor"] = c.ld_factor;
  }
  if (c.also_dst.buffer != Buffer::none) j["also_dst"] = operand_json(p, c.also_dst);
  return j;
}

nlohmann::json timed_json(const Plan& p, const Timed& t) {
  nlohmann::json j = operand_json(p, t.base);
  j["t_stride"] = t.t_stride;
  return j;
}

// The projection's GEMM keeps the keys of each pass's product: "projection" forward (h = cell_out
// W_hr^T), "projection_grad" backward (dcell = dh_proj W_hr); the reset before's is "gemm_n".
nlohmann::json recurrence_json(const Plan& p, const RecurrenceStep& r) {
  nlohmann::json kernels = nlohmann::json::array();
  for (int k : r.gate.thread_kernels)
    kernels.push_back(k < 0 ? std::string() : kernel_name(p.kernels[static_cast<std::size_t>(k)]));
  const bool forward = r.pass == Pass::forward;
  const nlohmann::json projection = r.projection ? gemm_json(p, r.projection->gemm) : nlohmann::json();
  return {{"kind", "recurrence"}, {"what", r.what}, {"thread_kernels", kernels},
          {"pass", forward ? "forward" : "backward"}, {"layer", r.layer}, {"direction", r.direction},
          {"reverse", r.reverse}, {"steps", r.steps},
          {"kernel", kernel_name(p.kernels[static_cast<std::size_t>(r.gate.kernel)])},
          {"gemm", gemm_json(p, r.gemm)}, {"gx", timed_json(p, r.gx)}, {"h", timed_json(p, r.h)},
          {"c", timed_json(p, r.c)}, {"gates", timed_json(p, r.gates)}, {"dy", timed_json(p, r.dy)},
          {"ld_dy", r.ld_dy}, {"projection", forward ? projection : nlohmann::json()},
          {"gemm_n", r.reset_before ? gemm_json(p, r.reset_before->gemm) : nlohmann::json()},
          {"projection_grad", forward ? nlohmann::json() : projection}};
}

nlohmann::json step_json(const Plan& p, const Step& step) {
  return std::visit(
      Overloaded{
          [&](const GemmStep& g) { return gemm_json(p, g); },
          [&](const CopyStep& c) {
            return nlohmann::json{{"kind", "copy"}, {"what", c.what}, {"src", operand_json(p, c.src)},
                                  {"dst", operand_json(p, c.dst)}, {"rows", c.rows}, {"cols", c.cols},
                                  {"ld_src", c.ld_src}, {"ld_dst", c.ld_dst}, {"blocks", c.blocks},
                                  {"block_src", c.block_src}, {"block_dst", c.block_dst},
                                  {"plus", c.plus.buffer == Buffer::none ? nlohmann::json() : operand_json(p, c.plus)}};
          },
          [&](const MaskStep& m) {
            return nlohmann::json{{"kind", "mask"}, {"what", m.what}, {"dst", operand_json(p, m.dst)},
                                  {"steps", m.steps}, {"batch", m.batch}, {"cols", m.cols},
                                  {"t_stride", m.t_stride}, {"n_stride", m.n_stride}};
          },
          [&](const DropoutStep& d) {
            return nlohmann::json{{"kind", "dropout"}, {"what", d.what},
                                  {"pass", d.pass == Pass::forward ? "forward" : "backward"}, {"layer", d.layer},
                                  {"p", d.p}, {"src", operand_json(p, d.src)}, {"dst", operand_json(p, d.dst)},
                                  {"mask", p.workspace.regions[static_cast<std::size_t>(d.mask_region)].name},
                                  {"elements", d.elements}};
          },
          [&](const ColumnSumStep& c) { return column_sum_json(p, c); },
          [&](const RecurrenceStep& r) { return recurrence_json(p, r); },
          [&](const PackStep& k) {
            return nlohmann::json{{"kind", "pack"}, {"what", k.what}, {"src", operand_json(p, k.src)},
                                  {"dst", operand_json(p, k.dst)}, {"k", k.k}, {"groups", k.groups},
                                  {"sequences", k.sequences}, {"blocking", blocking_json(p, k.blocking)}};
          }},
      step);
}

void stages_text(const Plan& p, const char* title, const std::vector<Stage>& stages, std::string& out) {
  if (stages.empty()) return;
  out += fmt::format("{}:\n", title);
  for (std::size_t s = 0; s < stages.size(); ++s)
    for (std::size_t l = 0; l < stages[s].lanes.size(); ++l)
      for (const Step& step : stages[s].lanes[l])
        out += fmt::format("  [stage {} lane {}] {}\n", s, l, step_text(p, step));
}

nlohmann::json stages_json(const Plan& p, const std::vector<Stage>& stages) {
  nlohmann::json arr = nlohmann::json::array();
  for (std::size_t s = 0; s < stages.size(); ++s)
    for (std::size_t l = 0; l < stages[s].lanes.size(); ++l)
      for (const Step& step : stages[s].lanes[l]) {
        nlohmann::json j = step_json(p, step);
        j["stage"] = s;
        j["lane"] = l;
        arr.push_back(std::move(j));
      }
  return arr;
}

nlohmann::json descriptor_json(const KernelDesc& k) {
  nlohmann::json j{{"generator_version", k.generator_version}, {"isa", std::string(to_string(k.isa_kind()))},
                   {"kind", k.kind_of() == KernelKind::gemm          ? "gemm"
                            : k.kind_of() == KernelKind::amx_gemm    ? "amx_gemm"
                            : k.kind_of() == KernelKind::dpbf16_gemm ? "dpbf16_gemm"
                            : k.kind_of() == KernelKind::vnni_gemm   ? "vnni_gemm"
                            : k.kind_of() == KernelKind::amx_int8_gemm ? "amx_int8_gemm"
                                                                     : "gate"},
                   {"rows", k.rows}, {"unroll", k.unroll}};
  if (k.kind_of() == KernelKind::amx_gemm || k.kind_of() == KernelKind::dpbf16_gemm ||
      k.kind_of() == KernelKind::vnni_gemm || k.kind_of() == KernelKind::amx_int8_gemm) {
    j.update({{"vectors", k.vectors}, {"n_tail", k.n_tail}, {"beta", k.beta}, {"a_row_stride", k.a_row_stride},
              {"b_k_stride", k.b_k_stride}, {"c_row_stride", k.c_row_stride}, {"b_lookahead", k.b_lookahead}});
    if (k.kind_of() == KernelKind::amx_gemm || k.kind_of() == KernelKind::amx_int8_gemm) j["a_lookahead"] = k.a_lookahead;
    if (k.kind_of() == KernelKind::vnni_gemm) j["int8_unit"] = std::string(to_string(static_cast<Int8Unit>(k.int8_unit)));
  } else if (k.kind_of() == KernelKind::gemm) {
    j.update({{"vectors", k.vectors}, {"n_tail", k.n_tail}, {"beta", k.beta}, {"a_row_stride", k.a_row_stride},
              {"a_k_stride", k.a_k_stride}, {"b_k_stride", k.b_k_stride}, {"c_row_stride", k.c_row_stride},
              {"b_lookahead", k.b_lookahead}, {"next_b_lines", k.next_b_lines},
              {"stream_c", static_cast<bool>(k.stream_c)}});
  } else {
    j.update({{"cell", std::string(to_string(k.cell_kind()))},
              {"pass", k.pass_kind() == Pass::forward ? "forward" : "backward"},
              {"training", static_cast<bool>(k.training)}, {"hidden", k.hidden}, {"cols", k.cols}, {"ld_h", k.ld_h},
              {"part", k.part}, {"clip", k.clip()}, {"gate_clip", k.gate_clip()}, {"relu_alpha", k.relu_alpha()},
              {"peephole", static_cast<bool>(k.peephole)}, {"input_forget", static_cast<bool>(k.input_forget)},
              {"gx_row_stride", k.gx_stride()}, {"dy_row_stride", k.dy_stride()}});
    if (k.custom_activations()) {  // ONNX's activations other than the cell's own, per role f, g, h
      nlohmann::json roles = nlohmann::json::array();
      for (int r = 0; r < kActivationRoles && k.activation[r]; ++r)
        roles.push_back(describe(k.activation_of(static_cast<ActivationRole>(r))));
      j["activations"] = roles;
    }
  }
  return j;
}

}  // namespace

std::string_view to_string(Buffer b) {
  static constexpr const char* kNames[] = {"none", "x",  "y",   "hx",  "cx",  "hy",      "cy",       "dy",       "dhy",
                                           "dcy",  "dx", "dhx", "dcx", "weights", "dweights", "workspace", "reserve", "packed"};
  return kNames[static_cast<int>(b)];
}

std::string to_text(const Plan& p) {
  std::string out = fmt::format(
      "plan: {} T={} N={} mode={} isa={}{} threads={} caches=L1d {} KiB, L2 {} KiB, L3 {} KiB, TLB reach {} KiB, "
      "{} zmm FMAs a cycle\n",
      describe(p.config), p.shape.seq_len, p.shape.batch, to_string(p.mode), to_string(p.isa),
      p.fpmath == FpMath::bf16 ? fmt::format(" fpmath=bf16 bf16_unit={}", to_string(p.bf16_unit))
      : p.quantize == Quantize::int8_dynamic ? fmt::format(" quantize=int8_dynamic int8_unit={}", to_string(p.int8_unit))
                                             : "",
      p.threads, p.caches.l1d / 1024, p.caches.l2 / 1024,
      p.caches.l3 / 1024, p.caches.tlb_reach / 1024, p.caches.zmm_fmas_per_cycle);
  for (const std::string& n : p.notes) out += fmt::format("note: {}\n", n);
  out += "kernels:\n";
  for (const KernelDesc& k : p.kernels) out += fmt::format("  {}  ({})\n", kernel_name(k), describe(k));
  out += fmt::format("workspace: {} bytes, reserve: {} bytes, packed weights: {} bytes\n", p.workspace.workspace_bytes,
                     p.workspace.reserve_bytes, p.workspace.packed_bytes);
  for (const Region& r : p.workspace.regions)
    out += fmt::format("  {:<9} {:<22} offset {:>12} size {:>12}\n", to_string(r.space), r.name, r.offset, r.size);
  stages_text(p, "pack weights", p.pack_weights, out);
  stages_text(p, "forward", p.forward, out);
  stages_text(p, "backward data", p.backward_data, out);
  stages_text(p, "backward weights", p.backward_weights, out);
  return out;
}

std::string to_json(const Plan& p) {
  nlohmann::json j;
  j["config"] = {{"cell", std::string(to_string(p.config.cell))}, {"input_size", p.config.input_size},
                 {"hidden_size", p.config.hidden_size}, {"num_layers", p.config.num_layers},
                 {"bidirectional", p.config.bidirectional}};
  j["shape"] = {{"seq_len", p.shape.seq_len}, {"batch", p.shape.batch}};
  j["mode"] = std::string(to_string(p.mode));
  j["isa"] = std::string(to_string(p.isa));
  j["threads"] = p.threads;
  j["fpmath"] = std::string(to_string(p.fpmath));
  if (p.fpmath == FpMath::bf16) j["bf16_unit"] = std::string(to_string(p.bf16_unit));
  j["quantize"] = std::string(to_string(p.quantize));
  if (p.quantize == Quantize::int8_dynamic) j["int8_unit"] = std::string(to_string(p.int8_unit));
  j["caches"] = {{"l1d_bytes", p.caches.l1d}, {"l2_bytes", p.caches.l2}, {"l3_bytes", p.caches.l3},
                    {"tlb_reach_bytes", p.caches.tlb_reach}, {"zmm_fmas_per_cycle", p.caches.zmm_fmas_per_cycle}};
  j["packed_bytes"] = p.workspace.packed_bytes;
  j["notes"] = p.notes;
  j["kernels"] = nlohmann::json::array();
  for (const KernelDesc& k : p.kernels)
    j["kernels"].push_back({{"name", kernel_name(k)}, {"descriptor", descriptor_json(k)}});
  j["workspace_bytes"] = p.workspace.workspace_bytes;
  j["reserve_bytes"] = p.workspace.reserve_bytes;
  j["regions"] = nlohmann::json::array();
  for (const Region& r : p.workspace.regions)
    j["regions"].push_back({{"name", r.name}, {"space", std::string(to_string(r.space))}, {"offset", r.offset},
                            {"size", r.size}});
  j["steps"] = {{"pack_weights", stages_json(p, p.pack_weights)}, {"forward", stages_json(p, p.forward)},
                {"backward_data", stages_json(p, p.backward_data)},
                {"backward_weights", stages_json(p, p.backward_weights)}};
  return j.dump();
}

}  // namespace rnnjit
