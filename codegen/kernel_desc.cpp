#include "codegen/kernel_desc.hpp"

#include <fmt/format.h>

#include "codegen/fnv1a.hpp"

namespace rnnjit {

std::size_t KernelDescHash::operator()(const KernelDesc& d) const {
  Fnv1a h;
  h.bytes(&d, sizeof(d));
  return static_cast<std::size_t>(h.value());
}

namespace {

// "_act" and each role's kind, with its parameters' bits where set: "_act5a3dcccccd_2_2".
std::string activations_suffix(const KernelDesc& d) {
  if (!d.custom_activations()) return "";
  std::string s = "_act";
  for (int r = 0; r < kActivationRoles && d.activation[r]; ++r) {
    s += fmt::format("{}{}", r ? "_" : "", d.activation[r]);
    if (d.activation_alpha_bits[r]) s += fmt::format("a{:08x}", d.activation_alpha_bits[r]);
    if (d.activation_beta_bits[r]) s += fmt::format("b{:08x}", d.activation_beta_bits[r]);
  }
  return s;
}

// " activations=[LeakyRelu(alpha=0.1), Tanh]" where the kernel has its own.
std::string describe_activations(const KernelDesc& d) {
  if (!d.custom_activations()) return "";
  std::string s;
  for (int r = 0; r < kActivationRoles && d.activation[r]; ++r)
    s += (r ? ", " : "") + describe(d.activation_of(static_cast<ActivationRole>(r)));
  return " activations=[" + s + "]";
}

// The int8 GEMM's unit in its name: "vnni" (AVX512-VNNI, as before the AVX2 units), "avxvnni"
// or "avx2".
std::string_view vnni_gemm_tag(const KernelDesc& d) {
  switch (static_cast<Int8Unit>(d.int8_unit)) {
    case Int8Unit::avx_vnni: return "avxvnni";
    case Int8Unit::avx2: return "avx2";
    default: return "vnni";
  }
}

}  // namespace

std::string kernel_name(const KernelDesc& d) {
  if (d.kind_of() == KernelKind::amx_gemm)
    return fmt::format("bf16gemm_amx_m{}_v{}_t{}_b{}_ar{}_bk{}_cr{}_l{}_pa{}", d.rows, d.vectors, d.n_tail, d.beta,
                       d.a_row_stride, d.b_k_stride, d.c_row_stride, d.b_lookahead, d.a_lookahead);
  if (d.kind_of() == KernelKind::amx_int8_gemm)
    return fmt::format("i8gemm_amx_m{}_v{}_t{}_b{}_ar{}_bk{}_cr{}_l{}_pa{}", d.rows, d.vectors, d.n_tail, d.beta,
                       d.a_row_stride, d.b_k_stride, d.c_row_stride, d.b_lookahead, d.a_lookahead);
  if (d.kind_of() == KernelKind::vnni_gemm)
    return fmt::format("i8gemm_{}_m{}_v{}_t{}_b{}_ar{}_bk{}_cr{}_l{}", vnni_gemm_tag(d), d.rows, d.vectors, d.n_tail, d.beta,
                       d.a_row_stride, d.b_k_stride, d.c_row_stride, d.b_lookahead);
  if (d.kind_of() == KernelKind::dpbf16_gemm)
    return fmt::format("bf16gemm_dp_m{}_v{}_t{}_b{}_ar{}_bk{}_cr{}_l{}", d.rows, d.vectors, d.n_tail, d.beta,
                       d.a_row_stride, d.b_k_stride, d.c_row_stride, d.b_lookahead);
  if (d.kind_of() == KernelKind::gemm)
    return fmt::format("sgemm_{}_m{}_v{}_t{}_b{}_ar{}_ak{}_bk{}_cr{}_u{}_l{}{}{}", to_string(d.isa_kind()), d.rows,
                       d.vectors, d.n_tail, d.beta, d.a_row_stride, d.a_k_stride, d.b_k_stride, d.c_row_stride,
                       d.unroll, d.b_lookahead, d.next_b_lines ? fmt::format("_nb{}", d.next_b_lines) : "",
                       d.stream_c ? "_nt" : "");
  // The clip is named by its bits so that every distinct value gives a distinct name.
  return fmt::format("{}_{}{}{}_{}_h{}_c{}_n{}_ld{}_u{}{}{}{}{}{}{}{}{}", to_string(d.cell_kind()),
                     d.pass_kind() == Pass::forward ? "fwd" : "bwd", d.training ? "_train" : "",
                     d.cell_kind() == CellKind::gru_reset_before ? (d.part ? "_n" : "_rz") : "",
                     to_string(d.isa_kind()), d.hidden, d.cols, d.rows, d.ld_h, d.unroll,
                     d.clip_bits ? fmt::format("_clip{:08x}", d.clip_bits) : "",
                     d.gate_clip_bits ? fmt::format("_gclip{:08x}", d.gate_clip_bits) : "",
                     d.relu_alpha_bits ? fmt::format("_alpha{:08x}", d.relu_alpha_bits) : "",
                     d.peephole ? "_peep" : "", d.input_forget ? "_cifg" : "",
                     d.gx_row_stride ? fmt::format("_gx{}", d.gx_row_stride) : "",
                     d.dy_row_stride ? fmt::format("_dy{}", d.dy_row_stride) : "", activations_suffix(d));
}

std::string describe(const KernelDesc& d) {
  if (d.kind_of() == KernelKind::amx_gemm)
    return fmt::format(
        "kind=amx_gemm isa={} rows={} vectors={} n_tail={} beta={} a_row_stride={} b_k_stride={} c_row_stride={} "
        "b_lookahead={} a_lookahead={} gen={}",
        to_string(d.isa_kind()), d.rows, d.vectors, d.n_tail, d.beta, d.a_row_stride, d.b_k_stride, d.c_row_stride,
        d.b_lookahead, d.a_lookahead, d.generator_version);
  if (d.kind_of() == KernelKind::amx_int8_gemm)
    return fmt::format("kind=amx_int8_gemm isa={} rows={} vectors={} n_tail={} beta={} a_row_stride={} b_k_stride={} "
                       "c_row_stride={} b_lookahead={} a_lookahead={} gen={}",
                       to_string(d.isa_kind()), d.rows, d.vectors, d.n_tail, d.beta, d.a_row_stride, d.b_k_stride,
                       d.c_row_stride, d.b_lookahead, d.a_lookahead, d.generator_version);
  if (d.kind_of() == KernelKind::vnni_gemm)
    return fmt::format("kind=vnni_gemm isa={} int8_unit={} rows={} vectors={} n_tail={} beta={} a_row_stride={} "
                       "b_k_stride={} c_row_stride={} b_lookahead={} gen={}",
                       to_string(d.isa_kind()), to_string(static_cast<Int8Unit>(d.int8_unit)), d.rows, d.vectors, d.n_tail, d.beta, d.a_row_stride, d.b_k_stride,
                       d.c_row_stride, d.b_lookahead, d.generator_version);
  if (d.kind_of() == KernelKind::dpbf16_gemm)
    return fmt::format("kind=dpbf16_gemm isa={} rows={} vectors={} n_tail={} beta={} a_row_stride={} b_k_stride={} "
                       "c_row_stride={} b_lookahead={} gen={}",
                       to_string(d.isa_kind()), d.rows, d.vectors, d.n_tail, d.beta, d.a_row_stride, d.b_k_stride,
                       d.c_row_stride, d.b_lookahead, d.generator_version);
  if (d.kind_of() == KernelKind::gemm)
    return fmt::format("kind=gemm isa={} rows={} vectors={} n_tail={} beta={} a_row_stride={} a_k_stride={} "
                       "b_k_stride={} c_row_stride={} unroll={} b_lookahead={} next_b_lines={} stream_c={} gen={}",
                       to_string(d.isa_kind()), d.rows, d.vectors, d.n_tail, d.beta, d.a_row_stride, d.a_k_stride,
                       d.b_k_stride, d.c_row_stride, d.unroll, d.b_lookahead, d.next_b_lines, d.stream_c,
                       d.generator_version);
  return fmt::format("kind=gate cell={} part={} pass={} training={} isa={} H={} cols={} N={} ld_h={} unroll={} clip={} "
                     "gate_clip={} relu_alpha={} peephole={} input_forget={} gx_row_stride={} dy_row_stride={} gen={}{}",
                     to_string(d.cell_kind()), d.part, d.pass_kind() == Pass::forward ? "fwd" : "bwd", d.training,
                     to_string(d.isa_kind()), d.hidden, d.cols, d.rows, d.ld_h, d.unroll, d.clip(), d.gate_clip(),
                     d.relu_alpha(), d.peephole, d.input_forget, d.gx_stride(), d.dy_stride(), d.generator_version,
                     describe_activations(d));
}

}  // namespace rnnjit
