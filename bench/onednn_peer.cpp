// rnnjit bench: the oneDNN peer (see onednn_peer.hpp). Compiled only when CMake found oneDNN;
// bench/onednn_peer_none.cpp stands in for it otherwise.
//
// Per layer l (each its own oneDNN RNN "stack" of one layer, L = 1 in oneDNN's dims):
//   src_layer  [T, N, I_l]   tnc    x for l = 0, else the layer below's output
//   src_iter   [1, D, N, H]  ldnc   hx + l*D*N*H (rnnjit's [L*D, N, H] is ldnc already)
//   weights    [1, D, I_l, G, H] / [1, D, H, G, H]: user copy in ldigo, primitive's in format any
//   bias       [1, D, G', H] ldgo   G' = G, or 4 for lbr_gru (vanilla gru: b_ih + b_hh per gate)
//   dst_layer  [T, N, Y]     tnc    y for the top layer; Y = D*H, bidirectional_concat = [fwd, rev] as
//                                   rnnjit, or with sum_directions Y = H, bidirectional_sum
//   dst_iter   [1, D, N, H]  ldnc   hy + l*D*N*H
#include "bench/onednn_peer.hpp"

#include "bench/onednn_common.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rnnjit/weights.hpp"

namespace rnnjit::bench {
namespace {

using namespace onednn;

using Args = std::unordered_map<int, memory>;

// The primitives of one layer shape (layer 0, and the layers above it when Y differs from I).
struct Prims {
  i64 input = 0;
  dnnl::rnn_primitive_desc_base fwd_pd, bwd_pd;
  dnnl::primitive fwd, bwd;
};

}  // namespace

bool onednn_available() { return true; }

void onednn_cap_isa(Isa isa) {
  static bool capped = false;  // oneDNN takes the cap once, before any JIT code
  if (isa != Isa::avx2 || capped) return;
  try {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN refused the ISA cap avx2 (") + e.what() +
                "): set DNNL_MAX_CPU_ISA=AVX2 (oneDNN 2.x) or ONEDNN_MAX_CPU_ISA=AVX2 (3.x) instead");
  }
  capped = true;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         (v->cpu_runtime == DNNL_RUNTIME_OMP   ? " (cpu runtime: OpenMP)"
          : v->cpu_runtime == DNNL_RUNTIME_TBB ? " (cpu runtime: TBB)"
          : v->cpu_runtime == DNNL_RUNTIME_SEQ ? " (cpu runtime: sequential)"
                                               : " (cpu runtime: other)");
}

void onednn_sgemm(int threads, std::int64_t size, const float* a, const float* b, float* c) {
  const ThreadScope scope(threads);
  const dnnl_status_t status = dnnl_sgemm('N', 'N', size, size, size, 1.0f, a, size, b, size, 0.0f, c, size);
  if (status != dnnl_success) throw Error("oneDNN's dnnl_sgemm failed with status " + std::to_string(status));
}

struct OnednnRnn::Impl {
  RnnConfig cfg;
  Shape shape;
  Mode mode;
  int threads;
  WeightLayout layout;
  i64 T, N, H, S, D, Y, G, GB, L;  // S: h's width (P with a projection, else H); Y: a layer's output width
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<Prims> prims;  // [0]: layer 0; [1]: layers above (when their shape differs)

  struct Layer {
    const Prims* p = nullptr;
    memory wl_user, wi_user, bias;      // ldigo, ldigo, ldgo: converted from canonical weights
    memory peephole, dpeephole;         // ldgo [1, D, 3, H]: LSTM with peepholes only
    memory wp_user, wp_fwd, wp_bwd;     // ldio [1, D, H, P] and the primitives' formats: LSTM projection only
    memory dwp_user, dwp_bwd;
    memory wl_fwd, wi_fwd;              // the forward primitive's format (== user when it is ldigo)
    memory wl_bwd, wi_bwd;              // the backward primitive's format (training)
    memory dwl_user, dwi_user, dbias;   // ldigo, ldigo, ldgo
    memory dwl_bwd, dwi_bwd;            // the backward primitive's diff format (== user when ldigo)
    std::vector<Reorder> fwd_reorders;  // per training step; empty in inference (done once)
    std::vector<Reorder> bwd_reorders, grad_reorders;
    Args fwd_args, bwd_args;            // data memories have no handle until a call sets one
  };
  std::vector<Layer> layers;

  // Layer outputs between layers (training: all kept for backward; inference: two, ping-pong),
  // and gradients between layers (two, ping-pong). [T, N, Y] each, allocated by oneDNN (aligned).
  std::vector<memory> act, dact;
  std::vector<float> zeros;                  // [D, N, H]: missing hx/cx/dhy/dcy
  std::vector<float> hy_own, cy_own;         // [L, D, N, S], [L, D, N, H]: hy/cy when the caller gives none
  std::vector<float> dhx_own, dcx_own;       // [D, N, S], [D, N, H]: dhx/dcx when the caller gives none
  bool forward_done = false, backward_done = false;

  // bf16: the forward primitives' data (x, y, h, activations between layers) and the weights
  // are bf16, biases, peepholes and c FP32; each forward converts x and hx to bf16 and y and hy
  // back (rnnjit's --fpmath bf16 takes and gives FP32 too). Training keeps FP32 master weights,
  // reordered to bf16 in every forward and backward, and backward runs on FP32 gradients (oneDNN
  // wants every diff_* tensor of a bf16 RNN in FP32), the weight gradients included.
  bool bf16 = false;
  memory x16, y16, x_user, y_user, h_user;  // bf16 only: x and y, and FP32 views of the caller's
  std::vector<memory> h16_in, h16_out;      // bf16 only: per layer [1, D, N, H]

  Impl(const RnnConfig& c, const Shape& s, Mode m, int th, bool b16)
      : cfg(c), shape(s), mode(m), threads(th), layout(c), bf16(b16) {
    validate(c, s);
    // What the peer does not model is refused, never silently dropped.
    if (c.clip > 0.0f || c.dropout > 0.0f || c.gate_clip > 0.0f || c.input_forget ||
        (c.independent_stacks && c.num_layers > 1))
      throw Error("the oneDNN peer runs no cell clip, dropout, gate clip, input_forget or independent stacks, not " +
                  describe(c));
    if (bf16 && c.proj_size > 0) throw Error("the oneDNN peer runs the LSTM projection in FP32 only");
    check_threads(th);
    T = s.seq_len;
    N = s.batch;
    H = c.hidden_size;
    S = c.state_size();
    D = c.directions();
    Y = c.output_size();
    G = c.gates();
    GB = bias_gates(c.cell);
    L = c.num_layers;
  }

  bool training() const { return mode == Mode::training; }
  // Which of `act` holds layer l's input (l > 0) and its output (l < L - 1): training keeps every
  // layer's output for backward, inference ping-pongs between two.
  std::size_t act_below(i64 l) const { return static_cast<std::size_t>(training() ? l - 1 : (l - 1) % 2); }
  std::size_t act_out(i64 l) const { return static_cast<std::size_t>(training() ? l : l % 2); }
  bool lstm() const { return cfg.cell == CellKind::lstm; }
  bool peephole() const { return cfg.peephole; }
  bool projection() const { return cfg.proj_size > 0; }

  memory::desc md(const memory::dims& dims, tag t) const { return memory::desc(dims, dt::f32, t); }
  // The data and weights of the primitives: bf16 or FP32.
  memory::desc data_md(const memory::dims& dims, tag t) const {
    return memory::desc(dims, bf16 ? dt::bf16 : dt::f32, t);
  }
  // x, y and the layers' outputs: [T, N, C] in time-major or batch-major order.
  tag layer_tag() const { return cfg.batch_first ? tag::ntc : tag::tnc; }
  memory::dims iter_dims() const { return {1, D, N, S}; }    // h
  memory::dims iter_c_dims() const { return {1, D, N, H}; }  // c

  // The forward and (training) backward primitives for layers of input width `input`.
  Prims build(i64 input) const {
    const auto dir = direction_of(cfg);
    const auto src_layer = data_md({T, N, input}, layer_tag()), dst_layer = data_md({T, N, Y}, layer_tag());
    const auto iter = data_md(iter_dims(), tag::ldnc), iter_c = md(iter_c_dims(), tag::ldnc);
    const auto wl = data_md({1, D, input, G, H}, tag::any), wi = data_md({1, D, S, G, H}, tag::any);
    const auto bias = md({1, D, GB, H}, tag::ldgo);
    // The gradients: FP32 always (bf16 data included).
    const auto diff_src_layer = md({T, N, input}, layer_tag()), diff_dst_layer = md({T, N, Y}, layer_tag());
    const auto diff_iter = md(iter_dims(), tag::ldnc);
    const auto diff_wl = md({1, D, input, G, H}, tag::any), diff_wi = md({1, D, S, G, H}, tag::any);
    const auto fwd_kind = training() ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    const auto bwd_kind = dnnl::prop_kind::backward;
    Prims p;
    p.input = input;
    auto build_gru = [&](auto forward, auto backward) {
      using F = typename decltype(forward)::type;
      using B = typename decltype(backward)::type;
      const auto fpd = forward_pd<F>(eng, fwd_kind, dir, src_layer, iter, wl, wi, bias, dst_layer, iter);
      p.fwd_pd = fpd;
      p.fwd = F(fpd);
      if (training()) {
        const auto bpd = backward_pd<B>(eng, fpd, bwd_kind, dir, src_layer, iter, wl, wi, bias, dst_layer, iter,
                                        diff_src_layer, diff_iter, diff_wl, diff_wi, bias, diff_dst_layer, diff_iter);
        p.bwd_pd = bpd;
        p.bwd = B(bpd);
      }
    };
    switch (cfg.cell) {
      case CellKind::rnn_relu:
      case CellKind::rnn_tanh:
      case CellKind::rnn_sigmoid: {
        const auto act = vanilla_activation(cfg.cell);
        const float alpha = cfg.relu_alpha;  // eltwise_relu's slope below zero
        using F = dnnl::vanilla_rnn_forward;
        using B = dnnl::vanilla_rnn_backward;
#if DNNL_VERSION_MAJOR >= 3  // no flags argument before alpha
        const auto fpd = forward_pd<F>(eng, fwd_kind, act, dir, src_layer, iter, wl, wi, bias, dst_layer, iter, alpha);
#else
        const auto fpd = forward_pd<F>(eng, fwd_kind, act, dir, src_layer, iter, wl, wi, bias, dst_layer, iter,
                                       dnnl::rnn_flags::undef, alpha);
#endif
        p.fwd_pd = fpd;
        p.fwd = F(fpd);
        if (training()) {
#if DNNL_VERSION_MAJOR >= 3
          const auto bpd = backward_pd<B>(eng, fpd, bwd_kind, act, dir, src_layer, iter, wl, wi, bias, dst_layer, iter,
                                          diff_src_layer, diff_iter, diff_wl, diff_wi, bias, diff_dst_layer, diff_iter,
                                          alpha);
#else
          const auto bpd = backward_pd<B>(eng, fpd, bwd_kind, act, dir, src_layer, iter, wl, wi, bias, dst_layer, iter,
                                          diff_src_layer, diff_iter, diff_wl, diff_wi, bias, diff_dst_layer, diff_iter,
                                          dnnl::rnn_flags::undef, alpha);
#endif
          p.bwd_pd = bpd;
          p.bwd = B(bpd);
        }
        break;
      }
      case CellKind::lstm: {
        using F = dnnl::lstm_forward;
        using B = dnnl::lstm_backward;
        // Empty peephole and projection descriptors are oneDNN's "none".
        const memory::desc wp = peephole() ? md({1, D, 3, H}, tag::ldgo) : memory::desc();
        const memory::desc wr = projection() ? md({1, D, H, S}, tag::any) : memory::desc();
        const auto fpd =
            forward_pd<F>(eng, fwd_kind, dir, src_layer, iter, iter_c, wl, wi, wp, wr, bias, dst_layer, iter, iter_c);
        p.fwd_pd = fpd;
        p.fwd = F(fpd);
        if (training()) {
          const auto bpd = backward_pd<B>(eng, fpd, bwd_kind, dir, src_layer, iter, iter_c, wl, wi, wp, wr, bias,
                                          dst_layer, iter, iter_c, diff_src_layer, diff_iter, iter_c, diff_wl, diff_wi,
                                          wp, wr, bias, diff_dst_layer, diff_iter, iter_c);
          p.bwd_pd = bpd;
          p.bwd = B(bpd);
        }
        break;
      }
      // Both GRUs have the same primitive signatures: oneDNN's vanilla GRU (r applied before U_o,
      // one bias per gate) is rnnjit's reset-before GRU, lbr_gru PyTorch's.
      case CellKind::gru_reset_before:
        build_gru(std::type_identity<dnnl::gru_forward>{}, std::type_identity<dnnl::gru_backward>{});
        break;
      case CellKind::gru:
        build_gru(std::type_identity<dnnl::lbr_gru_forward>{}, std::type_identity<dnnl::lbr_gru_backward>{});
        break;
    }
    return p;
  }

  static memory::desc query(const dnnl::rnn_primitive_desc_base& pd, int arg) {
    return pd.query_md(dnnl::query::exec_arg_md, arg);
  }

  // A memory in `want`: `user` itself when the formats agree, else a new one with a reorder from
  // (or, for gradients, to) the user's.
  memory in_format(const memory& user, const memory::desc& want, std::vector<Reorder>* reorders, bool to_user) const {
    if (want == user.get_desc()) return user;
    memory m(want, eng);
    if (to_user)
      reorders->push_back({dnnl::reorder(m, user), m, user});
    else
      reorders->push_back({dnnl::reorder(user, m), user, m});
    return m;
  }

  void setup() {
    prims.push_back(build(cfg.input_size));
    if (L > 1 && Y != cfg.input_size) prims.push_back(build(Y));
    const i64 state = D * N * S, cell_state = D * N * H;
    zeros.assign(static_cast<std::size_t>(cell_state), 0.0f);  // H >= S: wide enough for h and c
    hy_own.assign(static_cast<std::size_t>(L * state), 0.0f);
    if (lstm()) cy_own.assign(static_cast<std::size_t>(L * cell_state), 0.0f);
    const auto between = data_md({T, N, Y}, layer_tag()), diff_between = md({T, N, Y}, layer_tag());
    for (i64 i = 0; i < (training() ? L - 1 : std::min<i64>(L - 1, 2)); ++i) act.emplace_back(between, eng);
    if (training()) {
      for (i64 i = 0; i < std::min<i64>(L - 1, 2); ++i) dact.emplace_back(diff_between, eng);
      dhx_own.assign(static_cast<std::size_t>(state), 0.0f);
      if (lstm()) dcx_own.assign(static_cast<std::size_t>(cell_state), 0.0f);
    }

    if (bf16) {
      x16 = memory(data_md({T, N, cfg.input_size}, layer_tag()), eng);
      y16 = memory(data_md({T, N, Y}, layer_tag()), eng);
      x_user = memory(md({T, N, cfg.input_size}, layer_tag()), eng, DNNL_MEMORY_NONE);
      y_user = memory(md({T, N, Y}, layer_tag()), eng, DNNL_MEMORY_NONE);
      h_user = memory(md(iter_dims(), tag::ldnc), eng, DNNL_MEMORY_NONE);
      for (i64 l = 0; l < L; ++l) {
        h16_in.emplace_back(data_md(iter_dims(), tag::ldnc), eng);
        h16_out.emplace_back(data_md(iter_dims(), tag::ldnc), eng);
      }
    }
    layers.resize(static_cast<std::size_t>(L));
    for (i64 l = 0; l < L; ++l) {
      Layer& ly = layers[static_cast<std::size_t>(l)];
      ly.p = &prims[l == 0 || prims.size() == 1 ? 0 : 1];
      const Prims& p = *ly.p;
      const i64 in = cfg.layer_input_size(l);
      ly.wl_user = memory(md({1, D, in, G, H}, tag::ldigo), eng);
      ly.wi_user = memory(md({1, D, S, G, H}, tag::ldigo), eng);
      ly.bias = memory(md({1, D, GB, H}, tag::ldgo), eng);
      // Inference reorders once (in set_weights); training reorders in every forward.
      ly.wl_fwd = in_format(ly.wl_user, query(p.fwd_pd, DNNL_ARG_WEIGHTS_LAYER), &ly.fwd_reorders, false);
      ly.wi_fwd = in_format(ly.wi_user, query(p.fwd_pd, DNNL_ARG_WEIGHTS_ITER), &ly.fwd_reorders, false);

      const auto none = [&](const memory::desc& d) { return memory(d, eng, DNNL_MEMORY_NONE); };
      const auto src_layer = md({T, N, in}, layer_tag()), dst_layer = md({T, N, Y}, layer_tag());
      const auto iter = md(iter_dims(), tag::ldnc), iter_c = md(iter_c_dims(), tag::ldnc);
      Args& fa = ly.fwd_args;
      if (bf16) {  // the bf16 copies, filled (x, hx) and read (y, hy) by every forward call
        const auto li = static_cast<std::size_t>(l);
        fa[DNNL_ARG_SRC_LAYER] = l == 0 ? x16 : act[act_below(l)];
        fa[DNNL_ARG_DST_LAYER] = l == L - 1 ? y16 : act[act_out(l)];
        fa[DNNL_ARG_SRC_ITER] = h16_in[li];
        fa[DNNL_ARG_DST_ITER] = h16_out[li];
      } else {  // the caller's buffers, or act's, set by every forward call
        fa[DNNL_ARG_SRC_LAYER] = none(src_layer);
        fa[DNNL_ARG_SRC_ITER] = none(iter);
        fa[DNNL_ARG_DST_LAYER] = none(dst_layer);
        fa[DNNL_ARG_DST_ITER] = none(iter);
      }
      if (lstm()) {
        fa[DNNL_ARG_SRC_ITER_C] = none(iter_c);
        fa[DNNL_ARG_DST_ITER_C] = none(iter_c);
      }
      fa[DNNL_ARG_WEIGHTS_LAYER] = ly.wl_fwd;
      fa[DNNL_ARG_WEIGHTS_ITER] = ly.wi_fwd;
      fa[DNNL_ARG_BIAS] = ly.bias;
      if (peephole()) {
        ly.peephole = memory(md({1, D, 3, H}, tag::ldgo), eng);
        fa[DNNL_ARG_WEIGHTS_PEEPHOLE] = ly.peephole;
      }
      if (projection()) {
        ly.wp_user = memory(md({1, D, H, S}, tag::ldio), eng);
        ly.wp_fwd = in_format(ly.wp_user, query(p.fwd_pd, DNNL_ARG_WEIGHTS_PROJECTION), &ly.fwd_reorders, false);
        fa[DNNL_ARG_WEIGHTS_PROJECTION] = ly.wp_fwd;
      }
      if (!training()) continue;

      fa[DNNL_ARG_WORKSPACE] = memory(query(p.fwd_pd, DNNL_ARG_WORKSPACE), eng);
      ly.wl_bwd = in_format(ly.wl_user, query(p.bwd_pd, DNNL_ARG_WEIGHTS_LAYER), &ly.bwd_reorders, false);
      ly.wi_bwd = in_format(ly.wi_user, query(p.bwd_pd, DNNL_ARG_WEIGHTS_ITER), &ly.bwd_reorders, false);
      ly.dwl_user = memory(md({1, D, in, G, H}, tag::ldigo), eng);
      ly.dwi_user = memory(md({1, D, S, G, H}, tag::ldigo), eng);
      ly.dbias = memory(md({1, D, GB, H}, tag::ldgo), eng);
      ly.dwl_bwd = in_format(ly.dwl_user, query(p.bwd_pd, DNNL_ARG_DIFF_WEIGHTS_LAYER), &ly.grad_reorders, true);
      ly.dwi_bwd = in_format(ly.dwi_user, query(p.bwd_pd, DNNL_ARG_DIFF_WEIGHTS_ITER), &ly.grad_reorders, true);
      if (!(query(p.bwd_pd, DNNL_ARG_DIFF_BIAS) == ly.dbias.get_desc()))
        throw Error("oneDNN: the backward primitive wants the bias gradient in a format other than ldgo");

      Args& ba = ly.bwd_args;
      // The forward's data memories are shared: backward reads the buffers the forward call used.
      for (int arg : {DNNL_ARG_SRC_LAYER, DNNL_ARG_SRC_ITER, DNNL_ARG_DST_LAYER, DNNL_ARG_DST_ITER, DNNL_ARG_WORKSPACE,
                      DNNL_ARG_BIAS})
        ba[arg] = fa[arg];
      if (lstm()) {
        ba[DNNL_ARG_SRC_ITER_C] = fa[DNNL_ARG_SRC_ITER_C];
        ba[DNNL_ARG_DST_ITER_C] = fa[DNNL_ARG_DST_ITER_C];
        ba[DNNL_ARG_DIFF_SRC_ITER_C] = none(iter_c);
        ba[DNNL_ARG_DIFF_DST_ITER_C] = none(iter_c);
      }
      ba[DNNL_ARG_WEIGHTS_LAYER] = ly.wl_bwd;
      ba[DNNL_ARG_WEIGHTS_ITER] = ly.wi_bwd;
      ba[DNNL_ARG_DIFF_SRC_LAYER] = none(src_layer);
      ba[DNNL_ARG_DIFF_SRC_ITER] = none(iter);
      ba[DNNL_ARG_DIFF_DST_LAYER] = none(dst_layer);
      ba[DNNL_ARG_DIFF_DST_ITER] = none(iter);
      ba[DNNL_ARG_DIFF_WEIGHTS_LAYER] = ly.dwl_bwd;
      ba[DNNL_ARG_DIFF_WEIGHTS_ITER] = ly.dwi_bwd;
      ba[DNNL_ARG_DIFF_BIAS] = ly.dbias;
      if (peephole()) {
        ly.dpeephole = memory(md({1, D, 3, H}, tag::ldgo), eng);
        ba[DNNL_ARG_WEIGHTS_PEEPHOLE] = ly.peephole;
        ba[DNNL_ARG_DIFF_WEIGHTS_PEEPHOLE] = ly.dpeephole;
      }
      if (projection()) {
        ly.wp_bwd = in_format(ly.wp_user, query(p.bwd_pd, DNNL_ARG_WEIGHTS_PROJECTION), &ly.bwd_reorders, false);
        ly.dwp_user = memory(md({1, D, H, S}, tag::ldio), eng);
        ly.dwp_bwd =
            in_format(ly.dwp_user, query(p.bwd_pd, DNNL_ARG_DIFF_WEIGHTS_PROJECTION), &ly.grad_reorders, true);
        ba[DNNL_ARG_WEIGHTS_PROJECTION] = ly.wp_bwd;
        ba[DNNL_ARG_DIFF_WEIGHTS_PROJECTION] = ly.dwp_bwd;
      }
    }
  }

  // Canonical (PyTorch) -> oneDNN's user layout.
  void convert_weights(std::span<const float> w) {
    check_size(w.size(), layout.total_elements(), false, "weights");
    for (i64 l = 0; l < L; ++l) {
      Layer& ly = layers[static_cast<std::size_t>(l)];
      const i64 in = cfg.layer_input_size(l);
      float* wl = data_of(ly.wl_user);
      float* wi = data_of(ly.wi_user);
      float* b = data_of(ly.bias);
      for (int d = 0; d < D; ++d) {
        canonical_to_ldigo(cfg, layout, w, l, d, wl + d * in * G * H, wi + d * S * G * H, b + d * GB * H);
        if (projection()) {  // W_hr [P, H] -> ldio [H, P]
          const float* w_hr = w.data() + layout.block(l, d, ParamKind::weight_hr).offset;
          float* wr = data_of(ly.wp_user) + d * H * S;
          for (i64 o = 0; o < S; ++o)
            for (i64 i = 0; i < H; ++i) wr[i * S + o] = w_hr[o * H + i];
        }
        if (peephole()) {  // rows P_i, P_f, P_o: oneDNN's order too
          const float* p = w.data() + layout.block(l, d, ParamKind::weight_peephole).offset;
          std::copy(p, p + 3 * H, data_of(ly.peephole) + d * 3 * H);
        }
      }
      if (!training()) {
        for (Reorder& r : ly.fwd_reorders) r.run(strm);
      }
    }
    strm.wait();
  }

  // oneDNN's user-layout gradients -> canonical.
  void gradients(std::span<float> dw) const {
    check_size(dw.size(), layout.total_elements(), false, "dweights");
    for (i64 l = 0; l < L; ++l) {
      const Layer& ly = layers[static_cast<std::size_t>(l)];
      const i64 in = cfg.layer_input_size(l);
      const float* wl = data_of(ly.dwl_user);
      const float* wi = data_of(ly.dwi_user);
      const float* b = data_of(ly.dbias);
      for (int d = 0; d < D; ++d) {
        float* w_ih = dw.data() + layout.block(l, d, ParamKind::weight_ih).offset;
        float* w_hh = dw.data() + layout.block(l, d, ParamKind::weight_hh).offset;
        // Without biases oneDNN's bias gradient has nowhere to go.
        std::vector<float> no_bias(cfg.bias ? 0 : static_cast<std::size_t>(G * H));
        float* b_ih = cfg.bias ? dw.data() + layout.block(l, d, ParamKind::bias_ih).offset : no_bias.data();
        float* b_hh = cfg.bias ? dw.data() + layout.block(l, d, ParamKind::bias_hh).offset : no_bias.data();
        for (int g = 0; g < G; ++g) {
          const i64 tg = torch_gate(cfg.cell, g);
          for (i64 o = 0; o < H; ++o) {
            const i64 row = tg * H + o;
            for (i64 i = 0; i < in; ++i) w_ih[row * in + i] = wl[((d * in + i) * G + g) * H + o];
            for (i64 i = 0; i < S; ++i) w_hh[row * S + i] = wi[((d * S + i) * G + g) * H + o];
            const float db = b[(d * GB + g) * H + o];
            b_ih[row] = db;  // the summed bias's gradient is each summand's
            b_hh[row] = cfg.cell == CellKind::gru && g == 2 ? b[(d * GB + 3) * H + o] : db;
          }
        }
        if (peephole()) {
          const float* dp = data_of(ly.dpeephole) + d * 3 * H;
          std::copy(dp, dp + 3 * H, dw.data() + layout.block(l, d, ParamKind::weight_peephole).offset);
        }
        if (projection()) {
          const float* dwr = data_of(ly.dwp_user) + d * H * S;
          float* dw_hr = dw.data() + layout.block(l, d, ParamKind::weight_hr).offset;
          for (i64 o = 0; o < S; ++o)
            for (i64 i = 0; i < H; ++i) dw_hr[o * H + i] = dwr[i * S + o];
        }
      }
    }
  }

  void forward(const ForwardIo& io) {
    const i64 state = L * D * N * S, cell_state = L * D * N * H;
    check_size(io.x.size(), x_elements(cfg, shape), false, "x");
    check_size(io.y.size(), y_elements(cfg, shape), false, "y");
    check_size(io.hx.size(), state, true, "hx");
    check_size(io.hy.size(), state, true, "hy");
    if (lstm()) {
      check_size(io.cx.size(), cell_state, true, "cx");
      check_size(io.cy.size(), cell_state, true, "cy");
    } else if (!io.cx.empty() || !io.cy.empty()) {
      throw Error("buffers 'cx' and 'cy' are for LSTM only");
    }
    const i64 step = D * N * S, cell_step = D * N * H;
    float* hy = io.hy.empty() ? hy_own.data() : io.hy.data();
    float* cy = io.cy.empty() ? cy_own.data() : io.cy.data();
    for (i64 l = 0; l < L; ++l) {
      Layer& ly = layers[static_cast<std::size_t>(l)];
      Args& a = ly.fwd_args;
      float* const hx_l = io.hx.empty() ? zeros.data() : mutable_ptr(io.hx) + l * step;
      if (bf16) {  // FP32 x and hx to bf16 first, into the memories the primitive reads (setup)
        const auto li = static_cast<std::size_t>(l);
        if (l == 0) {
          x_user.set_data_handle(mutable_ptr(io.x));
          dnnl::reorder(x_user, x16).execute(strm, x_user, x16);
        }
        h_user.set_data_handle(hx_l);
        dnnl::reorder(h_user, h16_in[li]).execute(strm, h_user, h16_in[li]);
      } else {
        a[DNNL_ARG_SRC_LAYER].set_data_handle(l == 0 ? mutable_ptr(io.x) : data_of(act[act_below(l)]));
        a[DNNL_ARG_DST_LAYER].set_data_handle(l == L - 1 ? io.y.data() : data_of(act[act_out(l)]));
        a[DNNL_ARG_SRC_ITER].set_data_handle(hx_l);
        a[DNNL_ARG_DST_ITER].set_data_handle(hy + l * step);
      }
      if (lstm()) {
        a[DNNL_ARG_SRC_ITER_C].set_data_handle(io.cx.empty() ? zeros.data() : mutable_ptr(io.cx) + l * cell_step);
        a[DNNL_ARG_DST_ITER_C].set_data_handle(cy + l * cell_step);
      }
      if (training()) {
        for (Reorder& r : ly.fwd_reorders) r.run(strm);
      }
      ly.p->fwd.execute(strm, a);
      if (bf16) {  // and y and hy back to FP32
        const auto li = static_cast<std::size_t>(l);
        h_user.set_data_handle(hy + l * step);
        dnnl::reorder(h16_out[li], h_user).execute(strm, h16_out[li], h_user);
        if (l == L - 1) {
          y_user.set_data_handle(io.y.data());
          dnnl::reorder(y16, y_user).execute(strm, y16, y_user);
        }
      }
    }
    strm.wait();
    forward_done = training();
  }

  void backward(const BackwardDataIo& io) {
    if (!training()) throw Error("OnednnRnn::backward needs Mode::training");
    if (!forward_done) throw Error("OnednnRnn::backward needs a forward call first (its workspace was used up)");
    const i64 state = L * D * N * S, cell_state = L * D * N * H;
    check_size(io.dy.size(), y_elements(cfg, shape), false, "dy");
    check_size(io.dx.size(), x_elements(cfg, shape), false, "dx");
    check_size(io.dhy.size(), state, true, "dhy");
    check_size(io.dhx.size(), state, true, "dhx");
    if (lstm()) {
      check_size(io.dcy.size(), cell_state, true, "dcy");
      check_size(io.dcx.size(), cell_state, true, "dcx");
    } else if (!io.dcy.empty() || !io.dcx.empty()) {
      throw Error("buffers 'dcy' and 'dcx' are for LSTM only");
    }
    const i64 step = D * N * S, cell_step = D * N * H;
    for (i64 l = L - 1; l >= 0; --l) {
      Layer& ly = layers[static_cast<std::size_t>(l)];
      Args& a = ly.bwd_args;
      // Layer l reads the gradient of its output from dact[l % 2] (written by layer l+1) and
      // writes the gradient of its input to dact[(l-1) % 2] (read by layer l-1).
      a[DNNL_ARG_DIFF_DST_LAYER].set_data_handle(l == L - 1 ? mutable_ptr(io.dy)
                                                            : data_of(dact[static_cast<std::size_t>(l % 2)]));
      a[DNNL_ARG_DIFF_SRC_LAYER].set_data_handle(l == 0 ? io.dx.data()
                                                        : data_of(dact[static_cast<std::size_t>((l - 1) % 2)]));
      a[DNNL_ARG_DIFF_DST_ITER].set_data_handle(io.dhy.empty() ? zeros.data() : mutable_ptr(io.dhy) + l * step);
      a[DNNL_ARG_DIFF_SRC_ITER].set_data_handle(io.dhx.empty() ? dhx_own.data() : io.dhx.data() + l * step);
      if (lstm()) {
        a[DNNL_ARG_DIFF_DST_ITER_C].set_data_handle(io.dcy.empty() ? zeros.data()
                                                                   : mutable_ptr(io.dcy) + l * cell_step);
        a[DNNL_ARG_DIFF_SRC_ITER_C].set_data_handle(io.dcx.empty() ? dcx_own.data() : io.dcx.data() + l * cell_step);
      }
      for (Reorder& r : ly.bwd_reorders) r.run(strm);
      // oneDNN accumulates into the weight gradients (2.x and 3.x alike).
      std::memset(ly.dwl_bwd.get_data_handle(), 0, ly.dwl_bwd.get_desc().get_size());
      std::memset(ly.dwi_bwd.get_data_handle(), 0, ly.dwi_bwd.get_desc().get_size());
      std::memset(ly.dbias.get_data_handle(), 0, ly.dbias.get_desc().get_size());
      if (peephole()) std::memset(ly.dpeephole.get_data_handle(), 0, ly.dpeephole.get_desc().get_size());
      if (projection()) std::memset(ly.dwp_bwd.get_data_handle(), 0, ly.dwp_bwd.get_desc().get_size());
      ly.p->bwd.execute(strm, a);
      for (Reorder& r : ly.grad_reorders) r.run(strm);
    }
    strm.wait();
    forward_done = false;
    backward_done = true;
  }

  PeerRun info() const {
    PeerRun r;
    r.library = onednn_version();
    r.isa = isa_name(dnnl::get_effective_cpu_isa());
    if (bf16) r.library += training() ? ", bf16 data and weights, FP32 gradients" : ", bf16 data and weights";
    r.threads = threads > 0 ? threads : ThreadScope::current();
    const Prims& p = prims.front();
    r.forward_impl = p.fwd_pd.impl_info_str();
    r.forward_weights = format_name(query(p.fwd_pd, DNNL_ARG_WEIGHTS_LAYER));
    if (training()) {
      r.backward_impl = p.bwd_pd.impl_info_str();
      r.backward_weights = format_name(query(p.bwd_pd, DNNL_ARG_WEIGHTS_LAYER));
    }
    r.primitives = static_cast<int>(prims.size()) * (training() ? 2 : 1);
    // bf16: x and y, and every layer's hx and hy, converted by a reorder of their own.
    if (bf16) r.executions_per_forward += 2 + 2 * static_cast<int>(L);
    for (const Layer& ly : layers) {
      r.executions_per_forward += 1 + static_cast<int>(ly.fwd_reorders.size()) * (training() ? 1 : 0);
      if (training())
        r.executions_per_backward += 1 + static_cast<int>(ly.bwd_reorders.size() + ly.grad_reorders.size());
    }
    return r;
  }
};

OnednnRnn::OnednnRnn(const RnnConfig& config, const Shape& shape, Mode mode, std::span<const float> canonical_weights,
                     int threads, bool bf16) {
  try {
    auto impl = std::make_unique<Impl>(config, shape, mode, threads, bf16);
    const ThreadScope scope(threads);
    impl->setup();
    impl->convert_weights(canonical_weights);
    impl_ = std::move(impl);
  } catch (const dnnl::error& e) {
    rethrow("setting up the primitives", e);
  }
}

OnednnRnn::OnednnRnn(OnednnRnn&&) noexcept = default;
OnednnRnn& OnednnRnn::operator=(OnednnRnn&&) noexcept = default;
OnednnRnn::~OnednnRnn() = default;

const RnnConfig& OnednnRnn::config() const { return impl_->cfg; }
Shape OnednnRnn::shape() const { return impl_->shape; }
Mode OnednnRnn::mode() const { return impl_->mode; }

PeerRun OnednnRnn::run_info() const {
  return run_guarded(0, "querying the primitives", [&] { return impl_->info(); });
}

void OnednnRnn::set_weights(std::span<const float> canonical_weights) {
  run_guarded(impl_->threads, "reordering the weights", [&] { impl_->convert_weights(canonical_weights); });
}

void OnednnRnn::forward(const ForwardIo& io) {
  run_guarded(impl_->threads, "forward", [&] { impl_->forward(io); });
}

void OnednnRnn::backward(const BackwardDataIo& io) {
  run_guarded(impl_->threads, "backward", [&] { impl_->backward(io); });
}

void OnednnRnn::weight_gradients(std::span<float> dweights) const {
  if (!impl_->training()) throw Error("OnednnRnn::weight_gradients needs Mode::training");
  if (!impl_->backward_done) throw Error("OnednnRnn::weight_gradients needs a backward call first");
  impl_->gradients(dweights);
}

}  // namespace rnnjit::bench
