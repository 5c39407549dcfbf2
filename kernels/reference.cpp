// rnnjit: the scalar reference (see reference.hpp). Written for clarity, not speed: every loop
// follows the math of PyTorch's nn.RNN / nn.LSTM / nn.GRU one element at a time.
//
// Dot products accumulate in double whatever T is, so that the float instantiation is as close
// to the exact result as float storage allows (the oracle should not add accumulation error of
// its own); the cell math runs in T.
#include "kernels/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/activation.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gate_clip.hpp"
#include "kernels/int8_reference.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit::reference {

template <typename T>
T sigmoid(T x) {
  // Two branches so that exp never overflows: exp(-x) for x >= 0, exp(x) for x < 0.
  // NaN compares false and takes the second branch, where exp(NaN) = NaN propagates.
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T>
T tanh_(T x) {
  return std::tanh(x);  // saturates to +-1 for large |x|, NaN for NaN
}

namespace {

using Acc = double;
using i64 = std::int64_t;

std::size_t sz(i64 n) { return static_cast<std::size_t>(n); }

// The canonical blocks of one layer and direction.
template <typename T>
struct LayerWeights {
  const T* w_ih;  // [G*H, in]
  const T* w_hh;  // [G*H, S]
  const T* b_ih;  // [G*H] (null: no biases)
  const T* b_hh;  // [G*H] (null: no biases)
  const T* w_hr;  // [P, H] (LSTM with projection; else null)
  const T* peep;  // [3, H] P_i, P_f, P_o (LSTM with peepholes; else null)
  i64 in;         // I_l
};

template <typename T>
LayerWeights<T> layer_weights(const WeightLayout& layout, const T* w, i64 layer, int dir) {
  const RnnConfig& config = layout.config();
  return {w + layout.block(layer, dir, ParamKind::weight_ih).offset,
          w + layout.block(layer, dir, ParamKind::weight_hh).offset,
          config.bias ? w + layout.block(layer, dir, ParamKind::bias_ih).offset : nullptr,
          config.bias ? w + layout.block(layer, dir, ParamKind::bias_hh).offset : nullptr,
          config.proj_size > 0 ? w + layout.block(layer, dir, ParamKind::weight_hr).offset : nullptr,
          config.peephole ? w + layout.block(layer, dir, ParamKind::weight_peephole).offset : nullptr,
          config.layer_input_size(layer)};
}

template <typename T>
GateClip<T> gate_clip_of(const RnnConfig& config) {
  if (config.gate_clip == 0.0f) return {};
  return GateClip<T>(static_cast<T>(config.gate_clip), [](T x) { return sigmoid(x); }, [](T x) { return tanh_(x); });
}

// Time index of processing step s of an element of length len: a forward direction walks
// t = 0..len-1, a reversed one t = len-1..0.
i64 time_of(bool reversed, i64 step, i64 len) { return reversed ? len - 1 - step : step; }
// Processing step of time index t (the same map: it is its own inverse).
i64 step_of(bool reversed, i64 t, i64 len) { return time_of(reversed, t, len); }

template <typename T>
T relu(T x, T alpha) {
  if (alpha != T(0)) return x > T(0) ? x : alpha * x;  // leaky (NaN stays NaN)
  return x < T(0) ? T(0) : x;                          // NaN stays NaN
}

// State of element n before the step at time t (t < len) of a direction, from the reserve: the
// initial state for the first step, otherwise the state kept at the previous processing
// step's time index. states [T, N, width], initial [N, width].
template <typename T>
const T* prev_state(const std::vector<T>& states, const std::vector<T>& initial, bool reversed, i64 t, i64 len,
                    i64 n, i64 width, i64 batch) {
  const i64 s = step_of(reversed, t, len);
  if (s == 0) return initial.data() + n * width;
  const i64 tp = time_of(reversed, s - 1, len);
  return states.data() + (tp * batch + n) * width;
}

// options.seq_lengths checked against T (all T when null).
std::vector<i64> checked_lengths(const Shape& shape, const std::int32_t* seq_lengths) {
  std::vector<i64> lengths(sz(shape.batch), shape.seq_len);
  if (!seq_lengths) return lengths;
  for (i64 n = 0; n < shape.batch; ++n) {
    const i64 len = seq_lengths[n];
    if (len < 1 || len > shape.seq_len)
      throw Error(fmt::format("seq_lengths[{}] = {} is outside [1, {}] (1 to the sequence length T)", n, len,
                              shape.seq_len));
    lengths[sz(n)] = len;
  }
  return lengths;
}

// A copy of a [T, N, width] tensor in sequence-major order, from the caller's layout
// ([N, T, width] when batch_first).
template <typename T>
std::vector<T> to_seq_major(const T* a, i64 seq_len, i64 batch, i64 width, bool batch_first) {
  std::vector<T> out(sz(seq_len * batch * width));
  for (i64 t = 0; t < seq_len; ++t)
    for (i64 n = 0; n < batch; ++n) {
      const i64 src = batch_first ? n * seq_len + t : t * batch + n;
      std::copy(a + src * width, a + (src + 1) * width, out.begin() + (t * batch + n) * width);
    }
  return out;
}

// Writes a sequence-major [T, N, width] tensor in the caller's layout.
template <typename T, typename U>
void from_seq_major(const std::vector<U>& a, i64 seq_len, i64 batch, i64 width, bool batch_first, T* out) {
  for (i64 t = 0; t < seq_len; ++t)
    for (i64 n = 0; n < batch; ++n) {
      const i64 dst = batch_first ? n * seq_len + t : t * batch + n;
      for (i64 k = 0; k < width; ++k) out[dst * width + k] = static_cast<T>(a[sz((t * batch + n) * width + k)]);
    }
}

template <typename T>
void check_reserve_matches(const RnnConfig& config, const Shape& shape, const Reserve<T>& reserve, const char* who) {
  const auto layers = sz(config.num_layers);
  if (reserve.h.size() != layers * sz(config.directions()) || reserve.inputs.size() != layers ||
      reserve.dropout.size() != layers || reserve.seq_len != shape.seq_len || reserve.batch != shape.batch ||
      reserve.lengths.size() != sz(shape.batch) || !(reserve.config == config))
    throw Error(fmt::format("{}: the reserve was not filled by a forward training call for {} T={} N={}", who,
                            describe(config), shape.seq_len, shape.batch));
}

// Quantize::int8_dynamic's products for one layer and direction (kernels/int8_reference.hpp):
// W_ih, W_hh and W_hr quantized per row once; x_t, h_{t-1}, r * h_{t-1} and the projection's
// input quantized as float rows when read, as the int8 GEMMs quantize theirs. The biases are
// added in Acc as the FP32 path adds them.
class Int8Products {
 public:
  Int8Products() = default;
  template <typename T>
  Int8Products(const LayerWeights<T>& lw, i64 GH, i64 S, i64 H, i64 P, ActivationQuantization aq)
      : aq_(aq),
        w_ih_(int8::quantize_matrix(floats(lw.w_ih, GH * lw.in).data(), GH, lw.in)),
        w_hh_(int8::quantize_matrix(floats(lw.w_hh, GH * S).data(), GH, S)) {
    if (P > 0) w_hr_ = int8::quantize_matrix(floats(lw.w_hr, P * H).data(), P, H);
  }
  template <typename T>
  void products(const T* x, const T* h, i64 in, i64 S, const LayerWeights<T>& lw, std::vector<Acc>& gx,
                std::vector<Acc>& gh) {
    const i64 GH = w_hh_.rows;
    matvec(w_ih_, 0, GH, floats(x, in), gx, lw.b_ih);
    matvec(w_hh_, 0, GH, floats(h, S), gh, lw.b_hh);
  }
  // The reset-before GRU's n rows of W_hh on r * h_{t-1}.
  template <typename T>
  void reset_products(const T* reset_h, const LayerWeights<T>& lw, std::vector<Acc>& gh) {
    const i64 H = w_hh_.rows / 3;
    std::vector<float> out(sz(H));
    int8::quantized_matvec(w_hh_, 2 * H, H, floats(reset_h, w_hh_.cols).data(), out.data(), aq_);
    for (i64 j = 0; j < H; ++j) gh[sz(2 * H + j)] = Acc(lw.b_hh ? lw.b_hh[2 * H + j] : 0) + Acc(out[sz(j)]);
  }
  // Row p of the projection of r_t.
  template <typename T>
  T projection(const T* r, i64 p) {
    if (p == 0) {
      projected_.resize(sz(w_hr_.rows));
      int8::quantized_matvec(w_hr_, 0, w_hr_.rows, floats(r, w_hr_.cols).data(), projected_.data(), aq_);
    }
    return static_cast<T>(projected_[sz(p)]);
  }

 private:
  template <typename T>
  static std::vector<float> floats(const T* v, i64 n) {
    return std::vector<float>(v, v + n);
  }
  template <typename T>
  void matvec(const int8::QuantizedMatrix& w, i64 row0, i64 rows, const std::vector<float>& x,
              std::vector<Acc>& out, const T* bias) const {
    std::vector<float> y(sz(rows));
    int8::quantized_matvec(w, row0, rows, x.data(), y.data(), aq_);
    for (i64 j = 0; j < rows; ++j) out[sz(row0 + j)] = Acc(bias ? bias[row0 + j] : 0) + Acc(y[sz(j)]);
  }
  ActivationQuantization aq_;
  int8::QuantizedMatrix w_ih_, w_hh_, w_hr_;
  std::vector<float> projected_;
};

}  // namespace

template <typename T>
void forward(const RnnConfig& config, const Shape& shape, const T* w, const T* x, const T* h0, const T* c0,
             T* y, T* hy, T* cy, Reserve<T>* reserve, const CallOptions& options) {
  validate(config, shape);
  const std::vector<i64> lengths = checked_lengths(shape, options.seq_lengths);
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const i64 S = config.state_size(), P = config.proj_size;
  const i64 L = config.num_layers;
  const int D = config.directions();
  const CellKind cell = config.cell;
  const bool lstm = cell == CellKind::lstm, gru = is_gru(cell), proj = P > 0;
  const bool reset_before = cell == CellKind::gru_reset_before;
  const bool clip = config.clip > 0.0f;
  const T clip_value = static_cast<T>(config.clip);
  const GateClip<T> gclip = gate_clip_of<T>(config);
  const T relu_alpha = static_cast<T>(config.relu_alpha);
  if (reserve && config.custom_activations())
    throw Error(fmt::format("training with activations {} is not supported: activations other than the cell's own "
                            "are for inference only",
                            describe_activations(config)));
  // Dropout acts in training only, between layers.
  const bool dropout = reserve != nullptr && config.dropout > 0.0f && L > 1;
  const bool int8 = options.quantize == Quantize::int8_dynamic;
  if (int8 && reserve) throw Error("quantize int8_dynamic is for inference only: forward training cannot quantize");
  const T dropout_factor = static_cast<T>(dropout_scale(config.dropout));

  if (reserve) {
    *reserve = Reserve<T>{};
    reserve->config = config;
    reserve->seq_len = TT;
    reserve->batch = N;
    reserve->lengths = lengths;
    reserve->inputs.resize(sz(L));
    reserve->dropout.resize(sz(L));
    const auto lds = sz(L * D);
    reserve->h.assign(lds, std::vector<T>(sz(TT * N * S)));
    reserve->gates.assign(lds, std::vector<T>(sz(TT * N * GH)));
    reserve->h0.assign(lds, std::vector<T>(sz(N * S)));
    if (lstm) {
      reserve->c.assign(lds, std::vector<T>(sz(TT * N * H)));
      reserve->c0.assign(lds, std::vector<T>(sz(N * H)));
    }
    if (proj) reserve->r.assign(lds, std::vector<T>(sz(TT * N * H)));
    if (gru) reserve->gru_hn.assign(lds, std::vector<T>(sz(TT * N * H)));
  }

  // A direction's h goes to its own columns of a layer's output, or (sum_directions) adds to
  // the one set of S columns.
  std::vector<T> layer_in = to_seq_major(x, TT, N, config.input_size, config.batch_first);
  std::vector<T> layer_out;
  std::vector<T> h_state(sz(N * S)), c_state(sz(N * H));  // per element: the state before its next step
  std::vector<T> cell_out(sz(H)), c_new(sz(H));           // one element's step: h (or r) and c
  std::vector<Acc> gx(sz(GH)), gh(sz(GH));
  std::vector<T> reset_h(sz(S));  // GRU reset before: r * h_{t-1}

  for (i64 l = 0; l < L; ++l) {
    const i64 in_width = config.layer_input_size(l), out_width = config.layer_output_size(l);
    const i64 in_stride = config.layer_input_stride(l);  // of layer_in's rows
    const bool summed = config.sums_output(l);
    layer_out.assign(sz(TT * N * out_width), T(0));  // rows past an element's length stay 0
    if (l > 0 && dropout) {
      // layer_in is layer l-1's output, sequence-major, element index (t*N + n)*in_stride + j.
      std::vector<T> factor(layer_in.size());
      for (std::size_t e = 0; e < layer_in.size(); ++e) {
        factor[e] = dropout_keep(options.dropout_seed, l - 1, static_cast<i64>(e), config.dropout) ? dropout_factor
                                                                                                  : T(0);
        layer_in[e] *= factor[e];
      }
      reserve->dropout[sz(l)] = std::move(factor);
    }
    if (reserve) reserve->inputs[sz(l)] = layer_in;
    for (int d = 0; d < D; ++d) {
      const i64 ld = l * D + d;
      const auto uld = sz(ld);
      const bool rev = config.reversed(d);
      const LayerWeights<T> lw = layer_weights(layout, w, l, d);
      const i64 in_col = config.layer_input_column(l, d);
      // The direction's activation functions (ONNX's f, g, h): the cell's own unless the config
      // names others.
      const bool custom = config.custom_activations(d);
      const ActivationFunction fa = config.activation(d, ActivationRole::f), ga = config.activation(d, ActivationRole::g),
                               ha = config.activation(d, ActivationRole::h);
      const auto act_f = [&](T a) {
        if (custom) return activate(fa, a);
        if (cell == CellKind::rnn_relu) return relu(a, relu_alpha);
        return cell == CellKind::rnn_tanh ? tanh_(a) : sigmoid(a);  // the vanilla RNNs' own, else LSTM's and GRU's f
      };
      const auto act_g = [&](T a) { return custom ? activate(ga, a) : tanh_(a); };
      const auto act_h = [&](T a) { return custom ? activate(ha, a) : tanh_(a); };
      // int8: the weights quantized once per call, each product's vector as it is read.
      Int8Products q8;
      if (int8) q8 = Int8Products(lw, GH, S, H, P, activation_quantization(options.int8_unit));
      for (i64 e = 0; e < N * S; ++e) h_state[sz(e)] = h0 ? h0[ld * N * S + e] : T(0);
      for (i64 e = 0; e < N * H; ++e) c_state[sz(e)] = (lstm && c0) ? c0[ld * N * H + e] : T(0);
      if (reserve) {
        reserve->h0[uld] = h_state;
        if (lstm) reserve->c0[uld] = c_state;
      }

      for (i64 s = 0; s < TT; ++s) {
        for (i64 n = 0; n < N; ++n) {
          const i64 len = lengths[sz(n)];
          if (s >= len) continue;  // past this element's end: its state stays as it is
          const i64 t = time_of(rev, s, len);
          const T* xt = layer_in.data() + (t * N + n) * in_stride + in_col;
          T* hp = h_state.data() + n * S;  // h_{t-1} [S], overwritten with h_t below
          T* cp = c_state.data() + n * H;  // c_{t-1} [H] (LSTM)
          // Both GEMV halves, kept apart because GRU needs W_hn h + b_hn on its own.
          if (int8) {
            q8.products(xt, hp, in_width, S, lw, gx, gh);
          } else {
            for (i64 j = 0; j < GH; ++j) {
              Acc a = lw.b_ih ? lw.b_ih[j] : 0;
              for (i64 k = 0; k < in_width; ++k) a += Acc(lw.w_ih[j * in_width + k]) * Acc(xt[k]);
              Acc b = lw.b_hh ? lw.b_hh[j] : 0;
              for (i64 k = 0; k < S; ++k) b += Acc(lw.w_hh[j * S + k]) * Acc(hp[k]);
              gx[sz(j)] = a;
              gh[sz(j)] = b;
            }
          }
          if (reset_before) {
            // n's recurrent product reads r * h_{t-1}: r first, then W_hn (r * h) + b_hn
            // replaces W_hn h + b_hn (S = H: no projection on a GRU).
            for (i64 k = 0; k < H; ++k) reset_h[sz(k)] = act_f(gclip(static_cast<T>(gx[sz(k)] + gh[sz(k)]))) * hp[k];
            if (int8) {
              q8.reset_products(reset_h.data(), lw, gh);
            } else {
              for (i64 j = 2 * H; j < GH; ++j) {
                Acc b = lw.b_hh ? lw.b_hh[j] : 0;
                for (i64 k = 0; k < S; ++k) b += Acc(lw.w_hh[j * S + k]) * Acc(reset_h[sz(k)]);
                gh[sz(j)] = b;
              }
            }
          }
          const i64 row = t * N + n;  // (t, n) row of the [T, N, ...] arrays
          for (i64 k = 0; k < H; ++k) {
            T h = 0, c = 0;
            if (is_vanilla(cell)) {
              const T a = gclip(static_cast<T>(gx[sz(k)] + gh[sz(k)]));
              h = act_f(a);
              if (reserve) reserve->gates[uld][sz(row * GH + k)] = h;
            } else if (lstm) {
              // Peepholes: i and f see c_{t-1}, o sees c_t; input_forget couples f = 1 - i.
              auto pre = [&](i64 gate, T peep) {
                return gclip(static_cast<T>(gx[sz(gate * H + k)] + gh[sz(gate * H + k)]) + peep);
              };
              const T* pp = lw.peep;
              const T i = act_f(pre(0, pp ? pp[k] * cp[k] : T(0)));
              const T f = config.input_forget ? T(1) - i : act_f(pre(1, pp ? pp[H + k] * cp[k] : T(0)));
              const T g = act_g(pre(2, T(0)));
              c = f * cp[k] + i * g;
              if (clip) c = std::clamp(c, -clip_value, clip_value);
              const T o = act_f(pre(3, pp ? pp[2 * H + k] * c : T(0)));
              h = o * act_h(c);  // r_t with a projection
              if (reserve) {
                T* gt = reserve->gates[uld].data() + row * GH;
                gt[k] = i, gt[H + k] = f, gt[2 * H + k] = g, gt[3 * H + k] = o;
                reserve->c[uld][sz(row * H + k)] = c;
                if (proj) reserve->r[uld][sz(row * H + k)] = h;
              }
            } else {  // GRU: linear before reset (hn = W_hn h + b_hn) or reset before (W_hn (r h) + b_hn)
              const T r = act_f(gclip(static_cast<T>(gx[sz(k)] + gh[sz(k)])));
              const T z = act_f(gclip(static_cast<T>(gx[sz(H + k)] + gh[sz(H + k)])));
              const T hn = static_cast<T>(gh[sz(2 * H + k)]);
              const T nn = reset_before ? act_g(gclip(static_cast<T>(gx[sz(2 * H + k)] + gh[sz(2 * H + k)])))
                                        : act_g(gclip(static_cast<T>(gx[sz(2 * H + k)]) + r * hn));
              h = (T(1) - z) * nn + z * hp[k];
              if (reserve) {
                T* gt = reserve->gates[uld].data() + row * GH;
                gt[k] = r, gt[H + k] = z, gt[2 * H + k] = nn;
                reserve->gru_hn[uld][sz(row * H + k)] = hn;
              }
            }
            cell_out[sz(k)] = h;
            c_new[sz(k)] = c;
          }
          // The new state: h_t = W_hr r_t [P] with a projection, else the cell's output [H].
          for (i64 p = 0; p < S; ++p) {
            T h = cell_out[sz(p)];
            if (proj && int8) {
              h = q8.projection(cell_out.data(), p);
            } else if (proj) {
              Acc a = 0;
              for (i64 k = 0; k < H; ++k) a += Acc(lw.w_hr[p * H + k]) * Acc(cell_out[sz(k)]);
              h = static_cast<T>(a);
            }
            hp[p] = h;
            T& out = layer_out[sz(row * out_width + (summed ? 0 : d * S) + p)];
            out = summed ? out + h : h;
            if (reserve) reserve->h[uld][sz(row * S + p)] = h;
          }
          if (lstm) std::copy(c_new.begin(), c_new.end(), cp);
        }
      }
      if (hy) std::copy(h_state.begin(), h_state.end(), hy + ld * N * S);
      if (cy && lstm) std::copy(c_state.begin(), c_state.end(), cy + ld * N * H);
    }
    std::swap(layer_in, layer_out);
  }
  // The last layer's output (never dropped).
  if (y) from_seq_major(layer_in, TT, N, config.output_size(), config.batch_first, y);
}

template <typename T>
void backward_data(const RnnConfig& config, const Shape& shape, const T* w, Reserve<T>& reserve, const T* dy,
                   const T* dhy, const T* dcy, T* dx, T* dh0, T* dc0) {
  validate(config, shape);
  check_reserve_matches(config, shape, reserve, "backward_data");
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const i64 S = config.state_size(), P = config.proj_size;
  const i64 L = config.num_layers;
  const int D = config.directions();
  const CellKind cell = config.cell;
  const bool lstm = cell == CellKind::lstm, proj = P > 0;
  const bool reset_before = cell == CellKind::gru_reset_before;
  const T clip_value = static_cast<T>(config.clip);
  const bool clip = config.clip > 0.0f;
  const GateClip<T> gclip = gate_clip_of<T>(config);
  const T relu_alpha = static_cast<T>(config.relu_alpha);
  const i64 out_width = config.output_size();
  // Rows of W_hh whose product is with h_{t-1} itself: all but n's with the reset before.
  const i64 h_rows = reset_before ? 2 * H : GH;
  const std::vector<i64>& lengths = reserve.lengths;

  reserve.dgx.assign(sz(L * D), std::vector<T>(sz(TT * N * GH)));
  reserve.dgh.assign(sz(L * D), std::vector<T>(sz(TT * N * GH)));
  reserve.dh.clear();
  if (proj) reserve.dh.assign(sz(L * D), std::vector<T>(sz(TT * N * P)));

  // Gradient w.r.t. the current layer's output [T, N, layer_output_size(l)], sequence-major.
  // Rows past an element's length are never read (dy there is ignored).
  std::vector<T> dout(sz(TT * N * out_width), T(0));
  if (dy) dout = to_seq_major(dy, TT, N, out_width, config.batch_first);
  std::vector<T> dh_next(sz(N * S)), dc_next(sz(N * H));  // per element: gradient w.r.t. its current state
  std::vector<T> dh_total(sz(S)), dcell(sz(H));
  std::vector<Acc> dh_prev(sz(S));

  for (i64 l = L - 1; l >= 0; --l) {
    const i64 in_width = config.layer_input_size(l), out_stride = config.layer_output_size(l);
    const i64 in_stride = config.layer_input_stride(l);
    // Both directions read the gradient of a summed output whole.
    const i64 dir_cols = config.sums_output(l) ? 0 : S;
    std::vector<Acc> din(sz(TT * N * in_stride), Acc(0));  // both directions add here, or each to its columns
    for (int d = 0; d < D; ++d) {
      const i64 ld = l * D + d;
      const auto uld = sz(ld);
      const bool rev = config.reversed(d);
      const LayerWeights<T> lw = layer_weights(layout, w, l, d);
      const i64 in_col = config.layer_input_column(l, d);
      const std::vector<T>& hs = reserve.h[uld];
      const std::vector<T>& gates = reserve.gates[uld];
      std::vector<T>& dgx = reserve.dgx[uld];
      std::vector<T>& dgh = reserve.dgh[uld];
      for (i64 e = 0; e < N * S; ++e) dh_next[sz(e)] = dhy ? dhy[ld * N * S + e] : T(0);
      for (i64 e = 0; e < N * H; ++e) dc_next[sz(e)] = (lstm && dcy) ? dcy[ld * N * H + e] : T(0);

      for (i64 s = TT - 1; s >= 0; --s) {
        for (i64 n = 0; n < N; ++n) {
          const i64 len = lengths[sz(n)];
          if (s >= len) continue;  // dhy/dcy wait for the element's last processed step
          const i64 t = time_of(rev, s, len);
          const i64 row = t * N + n;
          const T* hp = prev_state(hs, reserve.h0[uld], rev, t, len, n, S, N);
          const T* g = gates.data() + row * GH;
          T* gx = dgx.data() + row * GH;
          T* gh = dgh.data() + row * GH;
          T* dhn = dh_next.data() + n * S;
          T* dcn = dc_next.data() + n * H;
          // Total gradient reaching h_t: from this layer's output and from the next step.
          for (i64 p = 0; p < S; ++p) dh_total[sz(p)] = dhn[p] + dout[sz(row * out_stride + d * dir_cols + p)];
          // Gradient reaching the cell's output (r_t = o*tanh(c_t) through h_t = W_hr r_t).
          for (i64 k = 0; k < H; ++k) {
            if (!proj) {
              dcell[sz(k)] = dh_total[sz(k)];
              continue;
            }
            Acc a = 0;
            for (i64 p = 0; p < P; ++p) a += Acc(lw.w_hr[p * H + k]) * Acc(dh_total[sz(p)]);
            dcell[sz(k)] = static_cast<T>(a);
          }
          if (proj) std::copy(dh_total.begin(), dh_total.end(), reserve.dh[uld].begin() + row * P);
          std::fill(dh_prev.begin(), dh_prev.end(), Acc(0));  // the part that does not go through W_hh
          for (i64 k = 0; k < H; ++k) {
            const T dh = dcell[sz(k)];
            if (cell == CellKind::rnn_relu) {
              const T pass = gclip.relu_pass(g[k], relu_alpha);
              const T da = g[k] > T(0) ? dh * pass : relu_alpha != T(0) ? relu_alpha * dh * pass : T(0);
              gx[k] = gh[k] = da;
            } else if (cell == CellKind::rnn_tanh) {
              const T da = dh * (T(1) - g[k] * g[k]) * gclip.tanh_pass(g[k]);
              gx[k] = gh[k] = da;
            } else if (cell == CellKind::rnn_sigmoid) {
              const T da = dh * g[k] * (T(1) - g[k]) * gclip.sigmoid_pass(g[k]);
              gx[k] = gh[k] = da;
            } else if (lstm) {
              const T i = g[k], f = g[H + k], gg = g[2 * H + k], o = g[3 * H + k];
              const T c = reserve.c[uld][sz(row * H + k)];
              const T cp = prev_state(reserve.c[uld], reserve.c0[uld], rev, t, len, n, H, N)[k];
              const T tc = tanh_(c);
              const T* pp = lw.peep;
              const T dO = dh * tc * o * (T(1) - o) * gclip.sigmoid_pass(o);
              // w.r.t. c_t: through h, through o's peephole, and from step t+1.
              T dc = dcn[k] + dh * o * (T(1) - tc * tc) + (pp ? dO * pp[2 * H + k] : T(0));
              // Through the clamp: only where c_t is strictly inside (-clip, clip).
              if (clip && !(c > -clip_value && c < clip_value)) dc = T(0);
              // input_forget: f = 1 - i, so i also reaches c through -c_{t-1}; f has no gradient.
              const T di = dc * (config.input_forget ? gg - cp : gg) * i * (T(1) - i) * gclip.sigmoid_pass(i);
              const T df = config.input_forget ? T(0) : dc * cp * f * (T(1) - f) * gclip.sigmoid_pass(f);
              const T dg = dc * i * (T(1) - gg * gg) * gclip.tanh_pass(gg);
              gx[k] = gh[k] = di;
              gx[H + k] = gh[H + k] = df;
              gx[2 * H + k] = gh[2 * H + k] = dg;
              gx[3 * H + k] = gh[3 * H + k] = dO;
              dcn[k] = dc * f + (pp ? di * pp[k] + df * pp[H + k] : T(0));  // becomes dc_{t-1}
            } else if (reset_before) {  // GRU, reset before: dr needs W_hn^T dn, formed below
              const T z = g[H + k], nn = g[2 * H + k];
              const T dn = dh * (T(1) - z) * (T(1) - nn * nn) * gclip.tanh_pass(nn);
              gx[H + k] = gh[H + k] = dh * (hp[k] - nn) * z * (T(1) - z) * gclip.sigmoid_pass(z);
              gx[2 * H + k] = gh[2 * H + k] = dn;  // W_hn and b_hn see dn directly
              dh_prev[sz(k)] = Acc(dh * z);
            } else {  // GRU
              const T r = g[k], z = g[H + k], nn = g[2 * H + k];
              const T hn = reserve.gru_hn[uld][sz(row * H + k)];
              const T dn = dh * (T(1) - z) * (T(1) - nn * nn) * gclip.tanh_pass(nn);  // d/d(pre-activation of n)
              const T dz = dh * (hp[k] - nn) * z * (T(1) - z) * gclip.sigmoid_pass(z);
              const T dr = dn * hn * r * (T(1) - r) * gclip.sigmoid_pass(r);
              gx[k] = gh[k] = dr;
              gx[H + k] = gh[H + k] = dz;
              gx[2 * H + k] = dn;
              gh[2 * H + k] = dn * r;
              dh_prev[sz(k)] = Acc(dh * z);
            }
          }
          if (reset_before) {
            // d(r * h_{t-1}) = W_hn^T dn reaches r (dr) and h_{t-1} (times r).
            for (i64 k = 0; k < H; ++k) {
              Acc drh = 0;
              for (i64 j = 2 * H; j < GH; ++j) drh += Acc(lw.w_hh[j * S + k]) * Acc(gh[j]);
              const T r = g[k];
              gx[k] = gh[k] = static_cast<T>(drh) * hp[k] * r * (T(1) - r) * gclip.sigmoid_pass(r);
              dh_prev[sz(k)] += drh * Acc(r);
            }
          }
          // Through the GEMMs: dh_{t-1} += W_hh^T dgh (the rows that read h_{t-1}), dx_t += W_ih^T dgx.
          for (i64 j = 0; j < GH; ++j) {
            for (i64 k = 0; k < S && j < h_rows; ++k) dh_prev[sz(k)] += Acc(lw.w_hh[j * S + k]) * Acc(gh[j]);
            for (i64 k = 0; k < in_width; ++k)
              din[sz(row * in_stride + in_col + k)] += Acc(lw.w_ih[j * in_width + k]) * Acc(gx[j]);
          }
          for (i64 k = 0; k < S; ++k) dhn[k] = static_cast<T>(dh_prev[sz(k)]);
        }
      }
      if (dh0) std::copy(dh_next.begin(), dh_next.end(), dh0 + ld * N * S);
      if (dc0 && lstm) std::copy(dc_next.begin(), dc_next.end(), dc0 + ld * N * H);
    }
    if (l > 0) {
      // Layer l read dropout(out_{l-1}): the gradient w.r.t. out_{l-1} goes through the same factor.
      const std::vector<T>& factor = reserve.dropout[sz(l)];
      dout.assign(din.size(), T(0));
      for (std::size_t e = 0; e < din.size(); ++e) {
        dout[e] = static_cast<T>(din[e]);
        if (!factor.empty()) dout[e] *= factor[e];
      }
    } else if (dx) {
      from_seq_major(din, TT, N, in_width, config.batch_first, dx);  // 0 past each element's length
    }
  }
}

template <typename T>
void backward_weights(const RnnConfig& config, const Shape& shape, const Reserve<T>& reserve, T* dw) {
  validate(config, shape);
  check_reserve_matches(config, shape, reserve, "backward_weights");
  const bool proj = config.proj_size > 0;
  if (reserve.dgx.size() != reserve.h.size() || reserve.dgh.size() != reserve.h.size() ||
      (proj && reserve.dh.size() != reserve.h.size()))
    throw Error("backward_weights: the reserve holds no gate gradients (call backward_data first)");
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const i64 S = config.state_size(), P = config.proj_size;
  const int D = config.directions();
  const std::vector<i64>& lengths = reserve.lengths;
  const bool reset_before = config.cell == CellKind::gru_reset_before;

  for (i64 l = 0; l < config.num_layers; ++l) {
    const i64 in_width = config.layer_input_size(l);
    const i64 in_stride = config.layer_input_stride(l);
    const std::vector<T>& in = reserve.inputs[sz(l)];  // after dropout
    for (int d = 0; d < D; ++d) {
      const auto uld = sz(l * D + d);
      const i64 in_col = config.layer_input_column(l, d);
      const bool rev = config.reversed(d);
      const std::vector<T>& dgx = reserve.dgx[uld];
      const std::vector<T>& dgh = reserve.dgh[uld];
      T* dw_ih = dw + layout.block(l, d, ParamKind::weight_ih).offset;
      T* dw_hh = dw + layout.block(l, d, ParamKind::weight_hh).offset;
      T* db_ih = config.bias ? dw + layout.block(l, d, ParamKind::bias_ih).offset : nullptr;
      T* db_hh = config.bias ? dw + layout.block(l, d, ParamKind::bias_hh).offset : nullptr;
      for (i64 j = 0; j < GH; ++j) {
        // dW_ih = sum_t dgx_t^T x_t, db_ih = sum_t dgx_t (and the same on the recurrent side
        // with h_{t-1}, the state before step t in this direction's processing order), over
        // the valid steps t < L_n of each element.
        std::vector<Acc> a_ih(sz(in_width), 0), a_hh(sz(S), 0);
        Acc b_ih = 0, b_hh = 0;
        for (i64 t = 0; t < TT; ++t) {
          for (i64 n = 0; n < N; ++n) {
            const i64 len = lengths[sz(n)];
            if (t >= len) continue;
            const i64 row = t * N + n;
            const Acc gx = dgx[sz(row * GH + j)], gh = dgh[sz(row * GH + j)];
            const T* xt = in.data() + row * in_stride + in_col;
            const T* hp = prev_state(reserve.h[uld], reserve.h0[uld], rev, t, len, n, S, N);
            // GRU with the reset before: W_hn multiplies r * h_{t-1}, not h_{t-1}.
            const T* r = reset_before && j >= 2 * H ? reserve.gates[uld].data() + row * GH : nullptr;
            for (i64 k = 0; k < in_width; ++k) a_ih[sz(k)] += gx * Acc(xt[k]);
            for (i64 k = 0; k < S; ++k) a_hh[sz(k)] += gh * Acc(hp[k]) * (r ? Acc(r[k]) : Acc(1));
            b_ih += gx;
            b_hh += gh;
          }
        }
        for (i64 k = 0; k < in_width; ++k) dw_ih[j * in_width + k] = static_cast<T>(a_ih[sz(k)]);
        for (i64 k = 0; k < S; ++k) dw_hh[j * S + k] = static_cast<T>(a_hh[sz(k)]);
        if (db_ih) db_ih[j] = static_cast<T>(b_ih);
        if (db_hh) db_hh[j] = static_cast<T>(b_hh);
      }
      if (config.peephole) {
        // dP_i = sum dgates_i c_{t-1}, dP_f = sum dgates_f c_{t-1}, dP_o = sum dgates_o c_t.
        T* dp = dw + layout.block(l, d, ParamKind::weight_peephole).offset;
        std::vector<Acc> acc(sz(3 * H), 0);
        for (i64 t = 0; t < TT; ++t)
          for (i64 n = 0; n < N; ++n) {
            const i64 len = lengths[sz(n)];
            if (t >= len) continue;
            const i64 row = t * N + n;
            const T* cp = prev_state(reserve.c[uld], reserve.c0[uld], rev, t, len, n, H, N);
            const T* c = reserve.c[uld].data() + row * H;
            for (i64 k = 0; k < H; ++k) {
              acc[sz(k)] += Acc(dgx[sz(row * GH + k)]) * Acc(cp[k]);
              acc[sz(H + k)] += Acc(dgx[sz(row * GH + H + k)]) * Acc(cp[k]);
              acc[sz(2 * H + k)] += Acc(dgx[sz(row * GH + 3 * H + k)]) * Acc(c[k]);
            }
          }
        for (i64 e = 0; e < 3 * H; ++e) dp[e] = static_cast<T>(acc[sz(e)]);
      }
      if (proj) {
        // dW_hr = sum_t dh_t^T r_t over the valid steps.
        T* dw_hr = dw + layout.block(l, d, ParamKind::weight_hr).offset;
        const std::vector<T>& dh = reserve.dh[uld];
        const std::vector<T>& r = reserve.r[uld];
        for (i64 p = 0; p < P; ++p)
          for (i64 k = 0; k < H; ++k) {
            Acc a = 0;
            for (i64 t = 0; t < TT; ++t)
              for (i64 n = 0; n < N; ++n)
                if (t < lengths[sz(n)]) a += Acc(dh[sz((t * N + n) * P + p)]) * Acc(r[sz((t * N + n) * H + k)]);
            dw_hr[p * H + k] = static_cast<T>(a);
          }
      }
    }
  }
}

#define RNNJIT_REFERENCE_INSTANTIATE(T)                                                                      \
  template T sigmoid<T>(T);                                                                                 \
  template T tanh_<T>(T);                                                                                   \
  template void forward<T>(const RnnConfig&, const Shape&, const T*, const T*, const T*, const T*, T*, T*, T*, \
                           Reserve<T>*, const CallOptions&);                                                \
  template void backward_data<T>(const RnnConfig&, const Shape&, const T*, Reserve<T>&, const T*, const T*,   \
                                 const T*, T*, T*, T*);                                                     \
  template void backward_weights<T>(const RnnConfig&, const Shape&, const Reserve<T>&, T*);

RNNJIT_REFERENCE_INSTANTIATE(float)
RNNJIT_REFERENCE_INSTANTIATE(double)
#undef RNNJIT_REFERENCE_INSTANTIATE

}  // namespace rnnjit::reference
