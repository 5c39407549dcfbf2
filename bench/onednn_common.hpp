// rnnjit bench: what the oneDNN peers (bench/onednn_peer.cpp: FP32 and bf16; bench/onednn_int8_peer.cpp:
// int8) share: the mapping of rnnjit's cells and canonical weights onto oneDNN's, the 2.x/3.x API
// differences, errors and threads. Included by the peers' sources only (oneDNN's header is not
// part of bench/onednn_peer.hpp).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#if RNNJIT_PEER_OPENMP
#include <omp.h>
#endif

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rnnjit/config.hpp"
#include "rnnjit/error.hpp"
#include "rnnjit/weights.hpp"

namespace rnnjit::bench::onednn {

using i64 = std::int64_t;
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// oneDNN's gate g holds PyTorch's gate torch_gate(g). LSTM: i,f,c~,o = i,f,g,o. lbr_gru and gru
// (vanilla, rnnjit's gru_reset_before): u,r,o = z,r,n (u is PyTorch's update gate z: both compute
// h = u*h_prev + (1-u)*o).
inline int torch_gate(CellKind cell, int g) { return is_gru(cell) && g < 2 ? 1 - g : g; }
// lbr_gru's bias has a fourth gate u' (the recurrent-side bias inside r * (U_o h + b_u'), = b_hn).
inline int bias_gates(CellKind cell) { return cell == CellKind::gru ? 4 : gate_count(cell); }

inline std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
#if DNNL_VERSION_MAJOR >= 3
    case dnnl::cpu_isa::isa_default: return "default";
    case dnnl::cpu_isa::avx2_vnni_2: return "avx2_vnni_2";
    case dnnl::cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
    case dnnl::cpu_isa::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
#else
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
#endif
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: break;
  }
  return "isa " + std::to_string(static_cast<int>(isa));
}

// What format_name reads of a memory descriptor: 2.x exposes dnnl_memory_desc_t's fields, 3.x
// answers queries.
struct MdLayout {
  bool packed = false;   // oneDNN's RNN-packed (GEMM) weights: 2.x's rnn_packed, 3.x's opaque
  bool blocked = false;  // a plain or blocked strided layout
  int inner_nblks = 0;   // > 0: blocked (brgemm)
  memory::dims dims, strides;
};

inline MdLayout layout_of(const memory::desc& md) {
  MdLayout r;
#if DNNL_VERSION_MAJOR >= 3
  r.packed = md.get_format_kind() == memory::format_kind::opaque;
  r.blocked = md.get_format_kind() == memory::format_kind::blocked;
  if (r.blocked) {
    r.inner_nblks = md.get_inner_nblks();
    r.strides = md.get_strides();
  }
  r.dims = md.get_dims();
#else
  r.packed = md.data.format_kind == dnnl_format_kind_rnn_packed;
  r.blocked = md.data.format_kind == dnnl_blocked;
  r.inner_nblks = md.data.format_desc.blocking.inner_nblks;
  r.dims.assign(md.data.dims, md.data.dims + md.data.ndims);
  r.strides.assign(md.data.format_desc.blocking.strides, md.data.format_desc.blocking.strides + md.data.ndims);
#endif
  return r;
}

// ldigo / ldgoi, dense or with the leading dimension padded (oneDNN pads it, e.g. when G*H is a
// multiple of 256 floats), or a blocked (brgemm) or packed (GEMM) format.
inline std::string format_name(const memory::desc& md) {
  const MdLayout m = layout_of(md);
  if (m.packed) return "packed";
  if (!m.blocked || m.dims.size() != 5) return "other";
  if (m.inner_nblks != 0) return "blocked";
  const memory::dims& d = m.dims;
  const memory::dims& s = m.strides;
  if (s[4] == 1 && s[3] == d[4] && s[2] >= d[3] * d[4]) return s[2] == d[3] * d[4] ? "ldigo" : "ldigo/padded";
  if (s[2] == 1 && s[4] >= d[2] && s[3] == d[4] * s[4]) return s[4] == d[2] ? "ldgoi" : "ldgoi/padded";
  return "other";
}

// A primitive descriptor of an RNN primitive Prim from the arguments of its 2.x operation
// descriptor: 2.x wraps them in Prim::desc, 3.x (which has no operation descriptors) takes the
// engine first; a backward one also takes its forward's primitive descriptor as a hint.
template <class Prim, class... A>
inline typename Prim::primitive_desc forward_pd(const dnnl::engine& eng, const A&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename Prim::primitive_desc(eng, args...);
#else
  return typename Prim::primitive_desc(typename Prim::desc(args...), eng);
#endif
}
template <class Prim, class Hint, class... A>
inline typename Prim::primitive_desc backward_pd(const dnnl::engine& eng, const Hint& hint, const A&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename Prim::primitive_desc(eng, args..., hint);
#else
  return typename Prim::primitive_desc(typename Prim::desc(args...), eng, hint);
#endif
}

[[noreturn]] inline void rethrow(const char* what, const dnnl::error& e) {
  throw Error(std::string("oneDNN: ") + what + ": " + e.what() + " (status " +
              std::to_string(static_cast<int>(e.status)) + ")");
}

inline void check_size(std::size_t got, i64 want, bool optional, const char* name) {
  if (optional && got == 0) return;
  if (static_cast<i64>(got) != want)
    throw Error(std::string("buffer '") + name + "' has " + std::to_string(got) + " elements, expected " +
                std::to_string(want) + (optional ? " (or none)" : ""));
}

inline float* mutable_ptr(std::span<const float> s) { return const_cast<float*>(s.data()); }
inline float* data_of(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

// Runs a scope with `threads` OpenMP threads (0: as they are), restoring the caller's setting.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : threads_(threads) {
#if RNNJIT_PEER_OPENMP
    if (threads_ > 0) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(threads_);
    }
#endif
  }
  ~ThreadScope() {
#if RNNJIT_PEER_OPENMP
    if (threads_ > 0) omp_set_num_threads(saved_);
#endif
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;
  // The number of threads oneDNN runs with inside the scope (0: unknown).
  static int current() {
#if RNNJIT_PEER_OPENMP
    return omp_get_max_threads();
#else
    return 0;
#endif
  }

 private:
  int threads_;
  [[maybe_unused]] int saved_ = 0;
};

// A peer's `threads`: 0 (OpenMP's default) or, with oneDNN's OpenMP runtime, a count.
inline void check_threads(int threads) {
  if (threads < 0) throw Error("threads must be 0 (OpenMP's default) or positive, got " + std::to_string(threads));
#if !RNNJIT_PEER_OPENMP
  if (threads > 0) throw Error("threads needs oneDNN's OpenMP runtime (not found at build time); use 0");
#endif
}

// oneDNN's direction of a layer of cfg: one way (reverse: right to left), or both, concatenated
// or summed.
inline dnnl::rnn_direction direction_of(const RnnConfig& cfg) {
  if (cfg.directions() == 1)
    return cfg.reverse ? dnnl::rnn_direction::unidirectional_right2left : dnnl::rnn_direction::unidirectional_left2right;
  return cfg.sum_directions ? dnnl::rnn_direction::bidirectional_sum : dnnl::rnn_direction::bidirectional_concat;
}

// The eltwise activation of oneDNN's vanilla RNN for rnnjit's rnn_relu, rnn_tanh, rnn_sigmoid.
inline dnnl::algorithm vanilla_activation(CellKind cell) {
  return cell == CellKind::rnn_relu   ? dnnl::algorithm::eltwise_relu
         : cell == CellKind::rnn_tanh ? dnnl::algorithm::eltwise_tanh
                                      : dnnl::algorithm::eltwise_logistic;
}

// f() with `threads` OpenMP threads (ThreadScope), oneDNN's errors turned into rnnjit::Error
// saying what failed.
template <class F>
inline decltype(auto) run_guarded(int threads, const char* what, F&& f) {
  try {
    const ThreadScope scope(threads);
    return f();
  } catch (const dnnl::error& e) {
    rethrow(what, e);
  }
}

// A reorder with its two memories, built once.
struct Reorder {
  dnnl::reorder prim;
  memory src, dst;
  void run(const dnnl::stream& s) { prim.execute(s, src, dst); }
};

// A primitive descriptor of a forward RNN primitive Prim with attributes (the int8 peer's
// quantization parameters): 2.x takes them between the operation descriptor and the engine, 3.x
// last.
template <class Prim, class... A>
inline typename Prim::primitive_desc forward_pd_with(const dnnl::engine& eng, const dnnl::primitive_attr& attr,
                                                     const A&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename Prim::primitive_desc(eng, args..., attr);
#else
  return typename Prim::primitive_desc(typename Prim::desc(args...), attr, eng);
#endif
}

// Layer l, direction d of canonical (PyTorch) weights in oneDNN's user layouts: W_ih [G*H, in] to
// wl [in, G, H] and W_hh [G*H, S] to wi [S, G, H] (direction d's blocks of ldigo), and the bias
// [GB, H] (direction d's block of ldgo): b_ih + b_hh per gate, lbr_gru's u' = b_hn apart (its o
// = b_in); zeros without biases.
inline void canonical_to_ldigo(const RnnConfig& cfg, const WeightLayout& layout, std::span<const float> w,
                               std::int64_t l, int d, float* wl, float* wi, float* b) {
  const std::int64_t in = cfg.layer_input_size(l), S = cfg.state_size(), H = cfg.hidden_size, G = cfg.gates();
  const float* w_ih = w.data() + layout.block(l, d, ParamKind::weight_ih).offset;
  const float* w_hh = w.data() + layout.block(l, d, ParamKind::weight_hh).offset;
  const std::vector<float> no_bias(cfg.bias ? 0 : static_cast<std::size_t>(G * H), 0.0f);
  const float* b_ih = cfg.bias ? w.data() + layout.block(l, d, ParamKind::bias_ih).offset : no_bias.data();
  const float* b_hh = cfg.bias ? w.data() + layout.block(l, d, ParamKind::bias_hh).offset : no_bias.data();
  for (int g = 0; g < G; ++g) {
    const std::int64_t tg = torch_gate(cfg.cell, g);
    for (std::int64_t o = 0; o < H; ++o) {
      const std::int64_t row = tg * H + o;
      for (std::int64_t i = 0; i < in; ++i) wl[(i * G + g) * H + o] = w_ih[row * in + i];
      for (std::int64_t i = 0; i < S; ++i) wi[(i * G + g) * H + o] = w_hh[row * S + i];
    }
  }
  for (int g = 0; g < bias_gates(cfg.cell); ++g) {
    for (std::int64_t o = 0; o < H; ++o) {
      float v;
      if (cfg.cell == CellKind::gru && g == 2)
        v = b_ih[2 * H + o];  // b_o = b_in
      else if (cfg.cell == CellKind::gru && g == 3)
        v = b_hh[2 * H + o];  // b_u' = b_hn
      else
        v = b_ih[torch_gate(cfg.cell, g) * H + o] + b_hh[torch_gate(cfg.cell, g) * H + o];
      b[g * H + o] = v;
    }
  }
}

}  // namespace rnnjit::bench::onednn
