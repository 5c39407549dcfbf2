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

// The four canonical blocks of one layer and direction.
template <typename T>
struct LayerWeights {
  const T* w_ih;  // [G*H, in]
  const T* w_hh;  // [G*H, H]
  const T* b_ih;  // [G*H]
  const T* b_hh;  // [G*H]
  i64 in;         // I_l
};

template <typename T>
LayerWeights<T> layer_weights(const WeightLayout& layout, const T* w, i64 layer, int dir) {
  return {w + layout.block(layer, dir, ParamKind::weight_ih).offset,
          w + layout.block(layer, dir, ParamKind::weight_hh).offset,
          w + layout.block(layer, dir, ParamKind::bias_ih).offset,
          w + layout.block(layer, dir, ParamKind::bias_hh).offset, layout.config().layer_input_size(layer)};
}

// Time index of processing step s: forward walks t = 0..T-1, reverse t = T-1..0.
i64 time_of(int dir, i64 step, i64 seq_len) { return dir == 0 ? step : seq_len - 1 - step; }
// Processing step of time index t (the same map: it is its own inverse).
i64 step_of(int dir, i64 t, i64 seq_len) { return time_of(dir, t, seq_len); }

template <typename T>
T relu(T x) {
  return x < T(0) ? T(0) : x;  // NaN stays NaN
}

// State before the step at time t in direction dir, from the reserve: h0 for the first step,
// otherwise the state kept at the previous processing step's time index.
template <typename T>
const T* prev_state(const std::vector<T>& states, const std::vector<T>& initial, int dir, i64 t, i64 seq_len,
                    i64 n, i64 hidden, i64 batch) {
  const i64 s = step_of(dir, t, seq_len);
  if (s == 0) return initial.data() + n * hidden;
  const i64 tp = time_of(dir, s - 1, seq_len);
  return states.data() + (tp * batch + n) * hidden;
}

void check_reserve_matches(const RnnConfig& config, const Shape& shape, i64 have_layers, i64 seq_len, i64 batch,
                           const RnnConfig& reserve_config, const char* who) {
  if (have_layers != config.num_layers * config.directions() || seq_len != shape.seq_len ||
      batch != shape.batch || !(reserve_config == config))
    throw Error(fmt::format("{}: the reserve was not filled by a forward training call for {} T={} N={}", who,
                            describe(config), shape.seq_len, shape.batch));
}

}  // namespace

template <typename T>
void forward(const RnnConfig& config, const Shape& shape, const T* w, const T* x, const T* h0, const T* c0,
             T* y, T* hy, T* cy, Reserve<T>* reserve) {
  validate(config, shape);
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const i64 L = config.num_layers;
  const int D = config.directions();
  const CellKind cell = config.cell;
  const bool lstm = cell == CellKind::lstm, gru = cell == CellKind::gru;

  if (reserve) {
    *reserve = Reserve<T>{};
    reserve->config = config;
    reserve->seq_len = TT;
    reserve->batch = N;
    reserve->inputs.resize(static_cast<std::size_t>(L));
    const auto lds = static_cast<std::size_t>(L * D);
    reserve->h.assign(lds, std::vector<T>(static_cast<std::size_t>(TT * N * H)));
    reserve->gates.assign(lds, std::vector<T>(static_cast<std::size_t>(TT * N * GH)));
    reserve->h0.assign(lds, std::vector<T>(static_cast<std::size_t>(N * H)));
    if (lstm) {
      reserve->c.assign(lds, std::vector<T>(static_cast<std::size_t>(TT * N * H)));
      reserve->c0.assign(lds, std::vector<T>(static_cast<std::size_t>(N * H)));
    }
    if (gru) reserve->gru_hn.assign(lds, std::vector<T>(static_cast<std::size_t>(TT * N * H)));
  }

  const i64 out_width = D * H;
  std::vector<T> layer_in(x, x + TT * N * config.input_size);
  std::vector<T> layer_out(static_cast<std::size_t>(TT * N * out_width));
  std::vector<T> h_prev(static_cast<std::size_t>(N * H)), c_prev(static_cast<std::size_t>(N * H));
  std::vector<T> h_new(static_cast<std::size_t>(N * H)), c_new(static_cast<std::size_t>(N * H));
  std::vector<Acc> gx(static_cast<std::size_t>(GH)), gh(static_cast<std::size_t>(GH));

  for (i64 l = 0; l < L; ++l) {
    const i64 in_width = config.layer_input_size(l);
    if (reserve) reserve->inputs[static_cast<std::size_t>(l)] = layer_in;
    for (int d = 0; d < D; ++d) {
      const i64 ld = l * D + d;
      const auto uld = static_cast<std::size_t>(ld);
      const LayerWeights<T> lw = layer_weights(layout, w, l, d);
      for (i64 e = 0; e < N * H; ++e) {
        h_prev[e] = h0 ? h0[ld * N * H + e] : T(0);
        c_prev[e] = (lstm && c0) ? c0[ld * N * H + e] : T(0);
      }
      if (reserve) {
        reserve->h0[uld] = h_prev;
        if (lstm) reserve->c0[uld] = c_prev;
      }

      for (i64 s = 0; s < TT; ++s) {
        const i64 t = time_of(d, s, TT);
        for (i64 n = 0; n < N; ++n) {
          const T* xt = layer_in.data() + (t * N + n) * in_width;
          const T* hp = h_prev.data() + n * H;
          // Both GEMV halves, kept apart because GRU needs W_hn h + b_hn on its own.
          for (i64 j = 0; j < GH; ++j) {
            Acc a = lw.b_ih[j];
            for (i64 k = 0; k < in_width; ++k) a += Acc(lw.w_ih[j * in_width + k]) * Acc(xt[k]);
            Acc b = lw.b_hh[j];
            for (i64 k = 0; k < H; ++k) b += Acc(lw.w_hh[j * H + k]) * Acc(hp[k]);
            gx[j] = a;
            gh[j] = b;
          }
          const i64 row = t * N + n;  // (t, n) row of the [T, N, ...] reserve arrays
          for (i64 k = 0; k < H; ++k) {
            T h = 0, c = 0;
            if (cell == CellKind::rnn_relu || cell == CellKind::rnn_tanh) {
              const T a = static_cast<T>(gx[k] + gh[k]);
              h = cell == CellKind::rnn_relu ? relu(a) : tanh_(a);
              if (reserve) reserve->gates[uld][row * GH + k] = h;
            } else if (lstm) {
              const T i = sigmoid(static_cast<T>(gx[k] + gh[k]));
              const T f = sigmoid(static_cast<T>(gx[H + k] + gh[H + k]));
              const T g = tanh_(static_cast<T>(gx[2 * H + k] + gh[2 * H + k]));
              const T o = sigmoid(static_cast<T>(gx[3 * H + k] + gh[3 * H + k]));
              c = f * c_prev[n * H + k] + i * g;
              h = o * tanh_(c);
              if (reserve) {
                T* gt = reserve->gates[uld].data() + row * GH;
                gt[k] = i, gt[H + k] = f, gt[2 * H + k] = g, gt[3 * H + k] = o;
                reserve->c[uld][row * H + k] = c;
              }
            } else {  // GRU, linear before reset
              const T r = sigmoid(static_cast<T>(gx[k] + gh[k]));
              const T z = sigmoid(static_cast<T>(gx[H + k] + gh[H + k]));
              const T hn = static_cast<T>(gh[2 * H + k]);
              const T nn = tanh_(static_cast<T>(gx[2 * H + k]) + r * hn);
              h = (T(1) - z) * nn + z * hp[k];
              if (reserve) {
                T* gt = reserve->gates[uld].data() + row * GH;
                gt[k] = r, gt[H + k] = z, gt[2 * H + k] = nn;
                reserve->gru_hn[uld][row * H + k] = hn;
              }
            }
            h_new[n * H + k] = h;
            c_new[n * H + k] = c;
            layer_out[row * out_width + d * H + k] = h;
            if (reserve) reserve->h[uld][row * H + k] = h;
          }
        }
        std::swap(h_prev, h_new);
        if (lstm) std::swap(c_prev, c_new);
      }
      if (hy) std::copy(h_prev.begin(), h_prev.end(), hy + ld * N * H);
      if (cy && lstm) std::copy(c_prev.begin(), c_prev.end(), cy + ld * N * H);
    }
    std::swap(layer_in, layer_out);
    layer_out.assign(static_cast<std::size_t>(TT * N * out_width), T(0));
  }
  if (y) std::copy(layer_in.begin(), layer_in.end(), y);  // the last layer's output
}

template <typename T>
void backward_data(const RnnConfig& config, const Shape& shape, const T* w, Reserve<T>& reserve, const T* dy,
                   const T* dhy, const T* dcy, T* dx, T* dh0, T* dc0) {
  validate(config, shape);
  check_reserve_matches(config, shape, static_cast<i64>(reserve.h.size()), reserve.seq_len, reserve.batch,
                        reserve.config, "backward_data");
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const i64 L = config.num_layers;
  const int D = config.directions();
  const CellKind cell = config.cell;
  const bool lstm = cell == CellKind::lstm;
  const i64 out_width = D * H;

  reserve.dgx.assign(static_cast<std::size_t>(L * D), std::vector<T>(static_cast<std::size_t>(TT * N * GH)));
  reserve.dgh.assign(static_cast<std::size_t>(L * D), std::vector<T>(static_cast<std::size_t>(TT * N * GH)));

  // Gradient w.r.t. the current layer's output [T, N, D*H].
  std::vector<T> dout(static_cast<std::size_t>(TT * N * out_width), T(0));
  if (dy) std::copy(dy, dy + TT * N * out_width, dout.begin());
  std::vector<T> dh_next(static_cast<std::size_t>(N * H)), dc_next(static_cast<std::size_t>(N * H));
  std::vector<Acc> dh_prev(static_cast<std::size_t>(N * H));
  std::vector<T> dc_prev(static_cast<std::size_t>(N * H));

  for (i64 l = L - 1; l >= 0; --l) {
    const i64 in_width = config.layer_input_size(l);
    std::vector<Acc> din(static_cast<std::size_t>(TT * N * in_width), Acc(0));  // both directions add here
    for (int d = 0; d < D; ++d) {
      const i64 ld = l * D + d;
      const auto uld = static_cast<std::size_t>(ld);
      const LayerWeights<T> lw = layer_weights(layout, w, l, d);
      const std::vector<T>& hs = reserve.h[uld];
      const std::vector<T>& gates = reserve.gates[uld];
      std::vector<T>& dgx = reserve.dgx[uld];
      std::vector<T>& dgh = reserve.dgh[uld];
      for (i64 e = 0; e < N * H; ++e) {
        dh_next[e] = dhy ? dhy[ld * N * H + e] : T(0);
        dc_next[e] = (lstm && dcy) ? dcy[ld * N * H + e] : T(0);
      }

      for (i64 s = TT - 1; s >= 0; --s) {
        const i64 t = time_of(d, s, TT);
        for (i64 n = 0; n < N; ++n) {
          const i64 row = t * N + n;
          const T* hp = prev_state(hs, reserve.h0[uld], d, t, TT, n, H, N);
          const T* g = gates.data() + row * GH;
          T* gx = dgx.data() + row * GH;
          T* gh = dgh.data() + row * GH;
          for (i64 k = 0; k < H; ++k) {
            // Total gradient reaching h_t: from this layer's output and from the next step.
            const T dh = dh_next[n * H + k] + dout[row * out_width + d * H + k];
            Acc direct = 0;  // part of dL/dh_{t-1} that does not go through W_hh
            if (cell == CellKind::rnn_relu) {
              const T da = g[k] > T(0) ? dh : T(0);
              gx[k] = gh[k] = da;
            } else if (cell == CellKind::rnn_tanh) {
              const T da = dh * (T(1) - g[k] * g[k]);
              gx[k] = gh[k] = da;
            } else if (lstm) {
              const T i = g[k], f = g[H + k], gg = g[2 * H + k], o = g[3 * H + k];
              const T c = reserve.c[uld][row * H + k];
              const T cp = prev_state(reserve.c[uld], reserve.c0[uld], d, t, TT, n, H, N)[k];
              const T tc = tanh_(c);
              const T dc = dc_next[n * H + k] + dh * o * (T(1) - tc * tc);
              const T di = dc * gg * i * (T(1) - i);
              const T df = dc * cp * f * (T(1) - f);
              const T dg = dc * i * (T(1) - gg * gg);
              const T dO = dh * tc * o * (T(1) - o);
              gx[k] = gh[k] = di;
              gx[H + k] = gh[H + k] = df;
              gx[2 * H + k] = gh[2 * H + k] = dg;
              gx[3 * H + k] = gh[3 * H + k] = dO;
              dc_prev[n * H + k] = dc * f;
            } else {  // GRU
              const T r = g[k], z = g[H + k], nn = g[2 * H + k];
              const T hn = reserve.gru_hn[uld][row * H + k];
              const T dn = dh * (T(1) - z) * (T(1) - nn * nn);  // d/d(pre-activation of n)
              const T dz = dh * (hp[k] - nn) * z * (T(1) - z);
              const T dr = dn * hn * r * (T(1) - r);
              gx[k] = gh[k] = dr;
              gx[H + k] = gh[H + k] = dz;
              gx[2 * H + k] = dn;
              gh[2 * H + k] = dn * r;
              direct = Acc(dh * z);
            }
            dh_prev[n * H + k] = direct;
          }
          // Through the GEMMs: dh_{t-1} += W_hh^T dgh, dx_t += W_ih^T dgx.
          for (i64 j = 0; j < GH; ++j) {
            for (i64 k = 0; k < H; ++k) dh_prev[n * H + k] += Acc(lw.w_hh[j * H + k]) * Acc(gh[j]);
            for (i64 k = 0; k < in_width; ++k)
              din[row * in_width + k] += Acc(lw.w_ih[j * in_width + k]) * Acc(gx[j]);
          }
        }
        for (i64 e = 0; e < N * H; ++e) dh_next[e] = static_cast<T>(dh_prev[e]);
        if (lstm) std::swap(dc_next, dc_prev);
      }
      if (dh0) std::copy(dh_next.begin(), dh_next.end(), dh0 + ld * N * H);
      if (dc0 && lstm) std::copy(dc_next.begin(), dc_next.end(), dc0 + ld * N * H);
    }
    if (l > 0) {
      dout.assign(din.size(), T(0));
      for (std::size_t e = 0; e < din.size(); ++e) dout[e] = static_cast<T>(din[e]);
    } else if (dx) {
      for (std::size_t e = 0; e < din.size(); ++e) dx[e] = static_cast<T>(din[e]);
    }
  }
}

template <typename T>
void backward_weights(const RnnConfig& config, const Shape& shape, const Reserve<T>& reserve, T* dw) {
  validate(config, shape);
  check_reserve_matches(config, shape, static_cast<i64>(reserve.h.size()), reserve.seq_len, reserve.batch,
                        reserve.config, "backward_weights");
  if (reserve.dgx.size() != reserve.h.size() || reserve.dgh.size() != reserve.h.size())
    throw Error("backward_weights: the reserve holds no gate gradients (call backward_data first)");
  const WeightLayout layout(config);
  const i64 TT = shape.seq_len, N = shape.batch, H = config.hidden_size, G = config.gates(), GH = G * H;
  const int D = config.directions();

  for (i64 l = 0; l < config.num_layers; ++l) {
    const i64 in_width = config.layer_input_size(l);
    const std::vector<T>& in = reserve.inputs[static_cast<std::size_t>(l)];
    for (int d = 0; d < D; ++d) {
      const auto uld = static_cast<std::size_t>(l * D + d);
      const std::vector<T>& dgx = reserve.dgx[uld];
      const std::vector<T>& dgh = reserve.dgh[uld];
      T* dw_ih = dw + layout.block(l, d, ParamKind::weight_ih).offset;
      T* dw_hh = dw + layout.block(l, d, ParamKind::weight_hh).offset;
      T* db_ih = dw + layout.block(l, d, ParamKind::bias_ih).offset;
      T* db_hh = dw + layout.block(l, d, ParamKind::bias_hh).offset;
      for (i64 j = 0; j < GH; ++j) {
        // dW_ih = sum_t dgx_t^T x_t, db_ih = sum_t dgx_t (and the same on the recurrent side
        // with h_{t-1}, the state before step t in this direction's processing order).
        std::vector<Acc> a_ih(static_cast<std::size_t>(in_width), 0), a_hh(static_cast<std::size_t>(H), 0);
        Acc b_ih = 0, b_hh = 0;
        for (i64 t = 0; t < TT; ++t) {
          for (i64 n = 0; n < N; ++n) {
            const i64 row = t * N + n;
            const Acc gx = dgx[row * GH + j], gh = dgh[row * GH + j];
            const T* xt = in.data() + row * in_width;
            const T* hp = prev_state(reserve.h[uld], reserve.h0[uld], d, t, TT, n, H, N);
            for (i64 k = 0; k < in_width; ++k) a_ih[k] += gx * Acc(xt[k]);
            for (i64 k = 0; k < H; ++k) a_hh[k] += gh * Acc(hp[k]);
            b_ih += gx;
            b_hh += gh;
          }
        }
        for (i64 k = 0; k < in_width; ++k) dw_ih[j * in_width + k] = static_cast<T>(a_ih[k]);
        for (i64 k = 0; k < H; ++k) dw_hh[j * H + k] = static_cast<T>(a_hh[k]);
        db_ih[j] = static_cast<T>(b_ih);
        db_hh[j] = static_cast<T>(b_hh);
      }
    }
  }
}

#define RNNJIT_REFERENCE_INSTANTIATE(T)                                                                      \
  template T sigmoid<T>(T);                                                                                 \
  template T tanh_<T>(T);                                                                                   \
  template void forward<T>(const RnnConfig&, const Shape&, const T*, const T*, const T*, const T*, T*, T*, T*, \
                           Reserve<T>*);                                                                    \
  template void backward_data<T>(const RnnConfig&, const Shape&, const T*, Reserve<T>&, const T*, const T*,   \
                                 const T*, T*, T*, T*);                                                     \
  template void backward_weights<T>(const RnnConfig&, const Shape&, const Reserve<T>&, T*);

RNNJIT_REFERENCE_INSTANTIATE(float)
RNNJIT_REFERENCE_INSTANTIATE(double)
#undef RNNJIT_REFERENCE_INSTANTIATE

}  // namespace rnnjit::reference
