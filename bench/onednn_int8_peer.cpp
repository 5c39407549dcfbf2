// rnnjit bench: oneDNN's int8 RNN inference as a peer (OnednnInt8Rnn, see onednn_peer.hpp).
// Compiled only when CMake found oneDNN; bench/onednn_peer_none.cpp stands in for it otherwise.
//
// Per layer l, one forward_inference primitive (its own weight scales):
//   src_layer  [T, N, I_l]   u8   x quantized by forward() for l = 0, else the layer below's dst_layer
//   src_iter   [1, D, N, H]  u8   hx + l*D*N*H, quantized by forward() (zeros: the shift)
//   src_iter_c [1, D, N, H]  f32  LSTM: cx + l*D*N*H, or zeros
//   weights    [1, D, I_l, G, H] / [1, D, H, G, H] s8: quantized here in ldigo, reordered into the
//              primitive's format (oneDNN's packed int8 format keeps the compensation of the shift)
//   bias       [1, D, G', H] f32, peephole [1, D, 3, H] f32, as the FP32 peer's
//   dst_layer  [T, N, Y]     f32 for the top layer (y), else u8 (the next layer's src_layer)
//   dst_iter   [1, D, N, H]  u8   dequantized by forward() into hy + l*D*N*H
//   dst_iter_c [1, D, N, H]  f32  LSTM: cy + l*D*N*H
#include "bench/onednn_common.hpp"
#include "bench/onednn_peer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rnnjit::bench {
namespace {

using namespace onednn;

// The u8 data quantization: [lo, hi] onto 0..255, the shift an integer (0 stays exact, as zero
// states and oneDNN's own padding need).
struct DataQuant {
  float scale = 1.0f, shift = 0.0f;
  static DataQuant covering(float lo, float hi) {
    DataQuant q;
    q.scale = 255.0f / (hi - lo);
    q.shift = std::clamp(std::nearbyint(-lo * q.scale), 0.0f, 255.0f);
    return q;
  }
  std::uint8_t quantize(float v) const {
    return static_cast<std::uint8_t>(std::clamp(std::nearbyint(scale * v + shift), 0.0f, 255.0f));
  }
  float dequantize(std::uint8_t q) const { return (static_cast<float>(q) - shift) / scale; }
};

// n values from `from` quantized into `to` (or the shift, the quantized zero, without `from`).
void quantize(const DataQuant& q, const float* from, std::uint8_t* to, i64 n) {
#if RNNJIT_PEER_OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
  for (i64 i = 0; i < n; ++i) to[i] = from ? q.quantize(from[i]) : static_cast<std::uint8_t>(q.shift);
}

// Whether oneDNN's int8 GEMMs multiply with VNNI's vpdpbusd here (int32 sums) rather than with
// vpmaddubsw, whose int16 sums of two u8 * s8 products saturate: measured on AVX2 (Zen 3,
// oneDNN 2.6.3), full 8-bit weights took an LSTM's error against FP32 past the bound that 7-bit
// ones keep (oneDNN's and ONNX Runtime's own advice for CPUs without VNNI: 7-bit weights).
bool vnni(dnnl::cpu_isa isa) {
  switch (isa) {
#if DNNL_VERSION_MAJOR >= 3
    case dnnl::cpu_isa::avx2_vnni_2:
    case dnnl::cpu_isa::avx512_core_fp16:
    case dnnl::cpu_isa::avx512_core_amx_fp16:
#endif
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

std::string cell_name(CellKind cell) {
  switch (cell) {
    case CellKind::lstm: return "LSTM";
    case CellKind::gru: return "lbr_gru (rnnjit's gru)";
    case CellKind::gru_reset_before: return "GRU (rnnjit's gru_reset_before)";
    default: return "vanilla RNN (" + std::string(to_string(cell)) + ")";
  }
}

}  // namespace

struct OnednnInt8Rnn::Impl {
  RnnConfig cfg;
  Shape shape;
  int threads;
  WeightLayout layout;
  i64 T, N, H, D, Y, G, GB, L;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  DataQuant dq;
  int weight_max = 127;  // the largest |s8| weight: 63 where vpmaddubsw would saturate (vnni())

  struct Layer {
    dnnl::rnn_primitive_desc_base pd;
    dnnl::primitive prim;
    memory wl, wi, bias, peephole;  // the primitive's formats (weights s8), bias and peephole f32
    std::unordered_map<int, memory> args;
  };
  std::vector<Layer> layers;
  memory x_u8, h_in, h_out;  // x, and one layer's hx and hy, quantized
  std::vector<memory> act;   // u8 outputs between layers (ping-pong)
  std::vector<float> zeros;  // [D, N, H]: a missing cx
  std::vector<float> cy_own;  // [L, D, N, H]: cy when the caller gives none

  Impl(const RnnConfig& c, const Shape& s, int th) : cfg(c), shape(s), threads(th), layout(c) {
    validate(c, s);
    if (c.clip > 0.0f || c.dropout > 0.0f || c.gate_clip > 0.0f || c.input_forget ||
        (c.independent_stacks && c.num_layers > 1) || c.proj_size > 0)
      throw Error("the oneDNN int8 peer runs no cell clip, dropout, gate clip, input_forget, independent stacks or "
                  "projection, not " + describe(c));
    // u8 outputs between layers hold h's range [-1, 1], not the sum of two directions' h.
    if (c.sum_directions) throw Error("the oneDNN int8 peer runs no summed directions, not " + describe(c));
    check_threads(th);
    T = s.seq_len;
    N = s.batch;
    H = c.hidden_size;
    D = c.directions();
    Y = c.output_size();
    G = c.gates();
    GB = bias_gates(c.cell);
    L = c.num_layers;
  }

  tag layer_tag() const { return cfg.batch_first ? tag::ntc : tag::tnc; }
  bool lstm() const { return cfg.cell == CellKind::lstm; }
  memory::dims iter_dims() const { return {1, D, N, H}; }

  // Layer l's primitive descriptor with its weight scales (mask: d, g, o of ldigo).
  dnnl::rnn_primitive_desc_base build(i64 l, const std::vector<float>& weight_scales) const {
    dnnl::primitive_attr attr;
    attr.set_rnn_data_qparams(dq.scale, dq.shift);
    attr.set_rnn_weights_qparams((1 << 1) | (1 << 3) | (1 << 4), weight_scales);
    const i64 in = cfg.layer_input_size(l);
    const auto dir = direction_of(cfg);
    const auto kind = dnnl::prop_kind::forward_inference;
    const memory::desc src_layer({T, N, in}, dt::u8, layer_tag());
    const memory::desc dst_layer({T, N, Y}, l == L - 1 ? dt::f32 : dt::u8, layer_tag());
    const memory::desc iter(iter_dims(), dt::u8, tag::ldnc), iter_c(iter_dims(), dt::f32, tag::ldnc);
    const memory::desc wl({1, D, in, G, H}, dt::s8, tag::any), wi({1, D, H, G, H}, dt::s8, tag::any);
    const memory::desc bias({1, D, GB, H}, dt::f32, tag::ldgo);
    switch (cfg.cell) {
      case CellKind::lstm: {
        const memory::desc wp = cfg.peephole ? memory::desc({1, D, 3, H}, dt::f32, tag::ldgo) : memory::desc();
        return forward_pd_with<dnnl::lstm_forward>(eng, attr, kind, dir, src_layer, iter, iter_c, wl, wi, wp,
                                                   memory::desc(), bias, dst_layer, iter, iter_c);
      }
      case CellKind::gru_reset_before:
        return forward_pd_with<dnnl::gru_forward>(eng, attr, kind, dir, src_layer, iter, wl, wi, bias, dst_layer, iter);
      case CellKind::gru:
        return forward_pd_with<dnnl::lbr_gru_forward>(eng, attr, kind, dir, src_layer, iter, wl, wi, bias, dst_layer,
                                                      iter);
      default: {
        const auto act = vanilla_activation(cfg.cell);
#if DNNL_VERSION_MAJOR >= 3
        return forward_pd_with<dnnl::vanilla_rnn_forward>(eng, attr, kind, act, dir, src_layer, iter, wl, wi, bias,
                                                          dst_layer, iter, cfg.relu_alpha);
#else
        return forward_pd_with<dnnl::vanilla_rnn_forward>(eng, attr, kind, act, dir, src_layer, iter, wl, wi, bias,
                                                          dst_layer, iter, dnnl::rnn_flags::undef, cfg.relu_alpha);
#endif
      }
    }
  }

  void setup(std::span<const float> w, std::span<const float> x) {
    check_size(w.size(), layout.total_elements(), false, "weights");
    check_size(x.size(), x_elements(cfg, shape), false, "x");
    float lo = -1.0f, hi = 1.0f;  // h's range (tanh or sigmoid of something, times a gate)
    for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    dq = DataQuant::covering(lo, hi);
    weight_max = vnni(dnnl::get_effective_cpu_isa()) ? 127 : 63;

    x_u8 = memory({{T, N, cfg.input_size}, dt::u8, layer_tag()}, eng);
    h_in = memory({iter_dims(), dt::u8, tag::ldnc}, eng);
    h_out = memory({iter_dims(), dt::u8, tag::ldnc}, eng);
    for (i64 i = 0; i < std::min<i64>(L - 1, 2); ++i) act.emplace_back(memory::desc({T, N, Y}, dt::u8, layer_tag()), eng);
    zeros.assign(static_cast<std::size_t>(D * N * H), 0.0f);
    if (lstm()) cy_own.assign(static_cast<std::size_t>(L * D * N * H), 0.0f);

    const auto none = [&](const memory::desc& d) { return memory(d, eng, DNNL_MEMORY_NONE); };
    for (i64 l = 0; l < L; ++l) {
      const i64 in = cfg.layer_input_size(l);
      // FP32 ldigo first (the FP32 peer's mapping), then a scale per (d, g, o) shared by W_ih and W_hh.
      std::vector<float> wl(static_cast<std::size_t>(D * in * G * H)), wi(static_cast<std::size_t>(D * H * G * H));
      Layer ly;
      ly.bias = memory({{1, D, GB, H}, dt::f32, tag::ldgo}, eng);
      float* b = data_of(ly.bias);
      for (int d = 0; d < D; ++d)
        canonical_to_ldigo(cfg, layout, w, l, d, wl.data() + d * in * G * H, wi.data() + d * H * G * H, b + d * GB * H);
      std::vector<float> scales(static_cast<std::size_t>(D * G * H));
      for (i64 d = 0; d < D; ++d)
        for (i64 go = 0; go < G * H; ++go) {
          float most = 0.0f;
          for (i64 i = 0; i < in; ++i) most = std::max(most, std::fabs(wl[static_cast<std::size_t>((d * in + i) * G * H + go)]));
          for (i64 i = 0; i < H; ++i) most = std::max(most, std::fabs(wi[static_cast<std::size_t>((d * H + i) * G * H + go)]));
          scales[static_cast<std::size_t>(d * G * H + go)] = most > 0.0f ? static_cast<float>(weight_max) / most : 1.0f;
        }
      const auto to_s8 = [&](const std::vector<float>& f, i64 rows, const memory::dims& dims) {
        memory m({dims, dt::s8, tag::ldigo}, eng);
        auto* q = static_cast<std::int8_t*>(m.get_data_handle());
        for (i64 d = 0; d < D; ++d)
          for (i64 i = 0; i < rows; ++i)
            for (i64 go = 0; go < G * H; ++go) {
              const std::size_t at = static_cast<std::size_t>((d * rows + i) * G * H + go);
              const float v = std::nearbyint(f[at] * scales[static_cast<std::size_t>(d * G * H + go)]);
              q[at] = static_cast<std::int8_t>(std::clamp(v, -static_cast<float>(weight_max), static_cast<float>(weight_max)));
            }
        return m;
      };
      ly.pd = build(l, scales);
      ly.prim = dnnl::primitive(ly.pd);
      const auto reordered = [&](memory user, int arg) {
        const memory::desc want = ly.pd.query_md(dnnl::query::exec_arg_md, arg);
        if (want == user.get_desc()) return user;
        memory m(want, eng);
        dnnl::reorder(user, m).execute(strm, user, m);
        return m;
      };
      ly.wl = reordered(to_s8(wl, in, {1, D, in, G, H}), DNNL_ARG_WEIGHTS_LAYER);
      ly.wi = reordered(to_s8(wi, H, {1, D, H, G, H}), DNNL_ARG_WEIGHTS_ITER);
      auto& a = ly.args;
      a[DNNL_ARG_SRC_LAYER] = l == 0 ? x_u8 : act[static_cast<std::size_t>((l - 1) % 2)];
      a[DNNL_ARG_DST_LAYER] = l == L - 1 ? none({{T, N, Y}, dt::f32, layer_tag()}) : act[static_cast<std::size_t>(l % 2)];
      a[DNNL_ARG_SRC_ITER] = h_in;
      a[DNNL_ARG_DST_ITER] = h_out;
      a[DNNL_ARG_WEIGHTS_LAYER] = ly.wl;
      a[DNNL_ARG_WEIGHTS_ITER] = ly.wi;
      a[DNNL_ARG_BIAS] = ly.bias;
      if (lstm()) {
        a[DNNL_ARG_SRC_ITER_C] = none({iter_dims(), dt::f32, tag::ldnc});
        a[DNNL_ARG_DST_ITER_C] = none({iter_dims(), dt::f32, tag::ldnc});
      }
      if (cfg.peephole) {  // rows P_i, P_f, P_o: oneDNN's order too
        ly.peephole = memory({{1, D, 3, H}, dt::f32, tag::ldgo}, eng);
        for (int d = 0; d < D; ++d) {
          const float* p = w.data() + layout.block(l, d, ParamKind::weight_peephole).offset;
          std::copy(p, p + 3 * H, data_of(ly.peephole) + d * 3 * H);
        }
        a[DNNL_ARG_WEIGHTS_PEEPHOLE] = ly.peephole;
      }
      layers.push_back(std::move(ly));
    }
    strm.wait();
  }

  void forward(const ForwardIo& io) {
    const i64 step = D * N * H, state = L * step;
    check_size(io.x.size(), x_elements(cfg, shape), false, "x");
    check_size(io.y.size(), y_elements(cfg, shape), false, "y");
    check_size(io.hx.size(), state, true, "hx");
    check_size(io.hy.size(), state, true, "hy");
    if (lstm()) {
      check_size(io.cx.size(), state, true, "cx");
      check_size(io.cy.size(), state, true, "cy");
    } else if (!io.cx.empty() || !io.cy.empty()) {
      throw Error("buffers 'cx' and 'cy' are for LSTM only");
    }
    quantize(dq, io.x.data(), static_cast<std::uint8_t*>(x_u8.get_data_handle()), x_elements(cfg, shape));
    float* cy = io.cy.empty() ? cy_own.data() : io.cy.data();
    for (i64 l = 0; l < L; ++l) {
      Layer& ly = layers[static_cast<std::size_t>(l)];
      quantize(dq, io.hx.empty() ? nullptr : io.hx.data() + l * step, static_cast<std::uint8_t*>(h_in.get_data_handle()),
               step);
      if (l == L - 1) ly.args[DNNL_ARG_DST_LAYER].set_data_handle(io.y.data());
      if (lstm()) {
        ly.args[DNNL_ARG_SRC_ITER_C].set_data_handle(io.cx.empty() ? zeros.data() : mutable_ptr(io.cx) + l * step);
        ly.args[DNNL_ARG_DST_ITER_C].set_data_handle(cy + l * step);
      }
      ly.prim.execute(strm, ly.args);
      strm.wait();
      if (!io.hy.empty()) {
        const auto* q = static_cast<const std::uint8_t*>(h_out.get_data_handle());
        for (i64 i = 0; i < step; ++i) io.hy[static_cast<std::size_t>(l * step + i)] = dq.dequantize(q[i]);
      }
    }
  }

  PeerRun info() const {
    PeerRun r;
    r.library = onednn_version() + ", int8 (u8 data, s8 weights" + (weight_max == 127 ? "" : " in 7 bits") +
                ", scales from the data)";
    r.isa = isa_name(dnnl::get_effective_cpu_isa());
    r.threads = threads > 0 ? threads : ThreadScope::current();
    r.forward_impl = layers.front().pd.impl_info_str();
    r.forward_weights = format_name(layers.front().pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS_LAYER));
    r.primitives = static_cast<int>(L);
    r.executions_per_forward = static_cast<int>(L);
    return r;
  }
};

OnednnInt8Rnn::OnednnInt8Rnn(const RnnConfig& config, const Shape& shape, std::span<const float> canonical_weights,
                             std::span<const float> x, int threads) {
  auto impl = std::make_unique<Impl>(config, shape, threads);
  const ThreadScope scope(threads);
  try {
    impl->setup(canonical_weights, x);
  } catch (const dnnl::error& e) {
    throw Error(onednn_version() + " runs no int8 " + cell_name(config.cell) + " of this configuration on this CPU (isa " +
                isa_name(dnnl::get_effective_cpu_isa()) + "): " + e.what());
  }
  impl_ = std::move(impl);
}

OnednnInt8Rnn::OnednnInt8Rnn(OnednnInt8Rnn&&) noexcept = default;
OnednnInt8Rnn& OnednnInt8Rnn::operator=(OnednnInt8Rnn&&) noexcept = default;
OnednnInt8Rnn::~OnednnInt8Rnn() = default;

const RnnConfig& OnednnInt8Rnn::config() const { return impl_->cfg; }
Shape OnednnInt8Rnn::shape() const { return impl_->shape; }
float OnednnInt8Rnn::data_scale() const { return impl_->dq.scale; }
float OnednnInt8Rnn::data_shift() const { return impl_->dq.shift; }
int OnednnInt8Rnn::weight_max() const { return impl_->weight_max; }

PeerRun OnednnInt8Rnn::run_info() const {
  return run_guarded(0, "querying the int8 primitives", [&] { return impl_->info(); });
}

void OnednnInt8Rnn::forward(const ForwardIo& io) {
  run_guarded(impl_->threads, "int8 forward", [&] { impl_->forward(io); });
}

}  // namespace rnnjit::bench
