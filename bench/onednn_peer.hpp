// rnnjit bench: oneDNN (2.x or 3.x) as a peer, so that the benchmark can time the same network through
// oneDNN's fused RNN primitives. Optional at configure time: without oneDNN the library
// rnnjit_bench_peers is built from bench/onednn_peer_none.cpp, onednn_available() is false and
// constructing an OnednnRnn throws rnnjit::Error. No oneDNN type appears in this header.
//
// Usage, like rnnjit's Execution (same ForwardIo/BackwardDataIo structs, same empty-span rules):
//   rnnjit::bench::OnednnRnn peer(config, {T, N}, Mode::training, weights, threads);  // setup, untimed
//   rnnjit::ForwardIo io{};       io.x = x; io.y = y; io.hx = hx; ...                  // empty: optional
//   rnnjit::BackwardDataIo bio{}; bio.dy = dy; bio.dx = dx; ...
//   peer.forward(io); peer.backward(bio);                                              // timed
//   peer.weight_gradients(dw);                                                         // canonical, untimed
//   std::puts(peer.run_info().summary().c_str());                                      // what ran
//
// Mapping (done once, in the constructor or set_weights, not in a timed call):
//   cells: rnn_relu/rnn_tanh/rnn_sigmoid -> vanilla_rnn with eltwise_relu (alpha = relu_alpha)/
//   eltwise_tanh/eltwise_logistic; lstm -> lstm (gate order
//   i,f,c~,o = PyTorch's i,f,g,o); gru -> lbr_gru (PyTorch's GRU is linear-before-reset) whose gate
//   order is u(=z),r,o(=n): the z and r blocks swap. Weights go from PyTorch's [G*H, I] to oneDNN's
//   ldigo (transposed); the bias (ldgo) is b_ih + b_hh per gate, except lbr_gru's four bias gates
//   u, r, o, u' = b_iz+b_hz, b_ir+b_hr, b_in, b_hn. Peepholes: weights_peephole ldgo (rows i, f, o
//   in both). A projection (proj_size, FP32 only): oneDNN's projection LSTM, W_hr [P, H] transposed
//   into weights_projection ldio [H, P]; h, hx and hy are P wide, c stays H.
//   reverse: unidirectional_right2left; batch_first: x, y and the layers' outputs in ntc; no
//   biases: oneDNN's bias all zeros (its gradient dropped). Refused with an Error naming the
//   configuration: cell clip, dropout, gate clip, input_forget, independent stacks of several
//   layers.
//   Layers: one primitive per layer (shared by the layers of equal shape). A multi-layer oneDNN
//   primitive cannot be used: with bidirectional_concat it runs each direction's stack of layers
//   independently and concatenates only the last layer's outputs, while rnnjit (cuDNN, PyTorch)
//   feeds every layer the concatenation [fwd, rev] of the layer below.
//
// What a timed call does:
//   inference forward: one forward_inference primitive execution per layer on weights already
//     reordered (at setup) into the format oneDNN picked from format_tag::any (2.6.3 and 3.2
//     alike on AVX-512: brgemm-blocked for vanilla RNN and LSTM; ldigo, its leading dimension
//     padded for some sizes, for both GRUs, which run the gemm-based "ref" implementation).
//   training forward: per layer, the reorder of the weights from oneDNN's user layout (dense ldigo)
//     into the forward_training primitive's format when that differs (weights change every step;
//     oneDNN usually pads the leading dimension, so it does), then forward_training (writes the
//     workspace kept for backward).
//   backward: per layer, top to bottom: reorder of the weights into the backward primitive's format
//     (ldgoi), zeroing of the weight gradients (oneDNN accumulates into them: 2.x has no
//     overwrite flag, and 3.x's rnn_flags::diff_weights_overwrite is not in its C++ API for LSTM or GRU), the backward primitive, and the reorder of the weight gradients
//     to ldigo when oneDNN produced another format. So one forward + backward is a full training
//     step of a framework that keeps its master weights in oneDNN's layout. The conversion between
//     rnnjit's canonical layout and oneDNN's (gate permutation, transposition, bias sums) is not part
//     of it; call set_weights()/weight_gradients() for that.
//
// Threads: oneDNN's runtime (Debian's is OpenMP). threads > 0 runs the constructor and every call
// with omp_set_num_threads(threads) (the caller's setting is restored after); 0 leaves OpenMP's
// default (OMP_NUM_THREADS, else every hardware thread). OpenMP threads spin at barriers: more
// threads than free cores makes oneDNN's times erratic (100x seen on a loaded 2-core machine).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "rnnjit/config.hpp"
#include "rnnjit/error.hpp"
#include "rnnjit/rnn.hpp"

namespace rnnjit::bench {

// True when this build has the oneDNN peer (oneDNN was found at configure time).
bool onednn_available();

// The oneDNN that runs, from dnnl_version() at run time: "oneDNN 3.2.0 (cpu runtime: OpenMP)";
// empty without the peer. The build may be against Debian's oneDNN 2.6.3 or another named by
// RNNJIT_ONEDNN_ROOT (CMakeLists.txt, tools/onednn3.sh).
std::string onednn_version();

// Caps the instructions oneDNN's JIT may use at those of `isa`, as rnnjit's plans are capped
// (dnnl::set_max_cpu_isa, what DNNL_MAX_CPU_ISA=AVX2 does for 2.x and ONEDNN_MAX_CPU_ISA=AVX2 for
// 3.x): Isa::avx2 caps it at AVX2 (its RNN and sgemm kernels then run ymm code); any other ISA
// leaves oneDNN's own choice. Must come before oneDNN's first primitive; calling it again with
// the same ISA does nothing. Throws Error where oneDNN refuses (called too late, or built
// without the cap); a no-op without the peer.
void onednn_cap_isa(Isa isa);

// C = A B for row-major size x size matrices through oneDNN's dnnl_sgemm on `threads` threads
// (0: OpenMP's default), for the FP32 GEMM ceiling (bench/gemm_ceiling.hpp). Throws Error
// when oneDNN was not found at build time or the call fails.
void onednn_sgemm(int threads, std::int64_t size, const float* a, const float* b, float* c);

// What an OnednnRnn runs, for the benchmark's report.
struct PeerRun {
  std::string library;           // onednn_version(), + ", bf16 data and weights" for the bf16 peer
  int threads = 0;               // threads oneDNN runs with (0: unknown, the runtime is not OpenMP)
  std::string isa;               // oneDNN's effective CPU ISA, e.g. "avx512_core_amx"
  std::string forward_impl;      // oneDNN's implementation of the forward primitives: "brgemm", "ref"
  std::string backward_impl;     // training only, else empty
  std::string forward_weights;   // the forward primitives' weights format: "ldigo", "ldgoi" (+ "/padded"
                                 // when oneDNN pads the leading dimension), "packed", "blocked"
  std::string backward_weights;  // training only: format of the backward primitives' weights
  int primitives = 0;            // RNN primitives created (forward + backward; layers of equal shape share one)
  int executions_per_forward = 0;   // primitive executions (RNN + reorders) in one forward call
  int executions_per_backward = 0;  // in one backward call (training), plus one memset per layer

  // One line with all of the above.
  std::string summary() const {
    std::string s = library + ", " + (threads > 0 ? std::to_string(threads) : std::string("?")) + " threads, isa " +
                    isa + ", forward " + forward_impl + " [weights " + forward_weights + "]";
    if (!backward_impl.empty()) s += ", backward " + backward_impl + " [weights " + backward_weights + "]";
    s += ", " + std::to_string(primitives) + " RNN primitives, " + std::to_string(executions_per_forward) +
         " executions per forward";
    if (!backward_impl.empty()) s += ", " + std::to_string(executions_per_backward) + " per backward";
    return s;
  }
};

class OnednnRnn {
 public:
  // Validates config and shape, builds the primitives for this shape and mode, and converts the
  // canonical weights (rnnjit/weights.hpp; size checked). threads: see above (negative: Error).
  // Throws Error (also for oneDNN's errors, and when oneDNN was not found at build time).
  // bf16: the primitives run on bf16 data and weights (FP32 biases and c), each forward converting
  // x and hx to bf16 and y and hy back, as rnnjit's --fpmath bf16 is called; training keeps FP32
  // master weights and runs backward on FP32 gradients.
  OnednnRnn(const RnnConfig& config, const Shape& shape, Mode mode, std::span<const float> canonical_weights,
            int threads = 0, bool bf16 = false);
  OnednnRnn(OnednnRnn&&) noexcept;
  OnednnRnn& operator=(OnednnRnn&&) noexcept;
  ~OnednnRnn();

  const RnnConfig& config() const;
  Shape shape() const;
  Mode mode() const;
  PeerRun run_info() const;

  // Replaces the weights (canonical layout) and, in inference, reorders them into the primitives'
  // format. Not meant to be timed.
  void set_weights(std::span<const float> canonical_weights);

  // Forward (inference or training, by the mode). Sizes are checked as in rnnjit::Execution:
  // x [T,N,I] and y [T,N,D*H] required; hx/cx [L*D,N,H] or empty (zeros); hy/cy or empty (not
  // written); cx/cy for LSTM only. Other ForwardIo fields (rnnjit's own) are ignored.
  // Training: backward reads x, hx, cx, y, hy and cy again, so these buffers must stay alive and
  // unchanged until it (as with cuDNN).
  void forward(const ForwardIo& io);

  // Training only, after forward: dy required, dhy/dcy or empty (zeros), dx required,
  // dhx/dcx or empty (not written). Leaves the weight gradients inside (see weight_gradients).
  void backward(const BackwardDataIo& io);

  // The weight gradients of the last backward, converted to the canonical layout (overwrites dw;
  // weights_size elements). db_ih and db_hh get the same values wherever oneDNN's bias is their
  // sum: every gate except lbr_gru's n gate, whose b_in and b_hn oneDNN keeps separate.
  void weight_gradients(std::span<float> dweights) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// oneDNN's int8 RNN inference, the benchmark's onednn_int8 (beside rnnjit's --quantize int8):
//   data: u8, one scale and shift for x, h and the outputs between layers (oneDNN's
//     rnn_data_qparams: u8 = scale * v + shift, common to src_layer, src_iter, dst_layer and
//     dst_iter), computed from the x given at construction and h's range [-1, 1]: the range
//     [min(x, -1), max(x, 1)] onto 0..255, the shift rounded so that 0 is exact. oneDNN fixes
//     them in the primitive: later calls' x are quantized with them (saturating).
//   weights: s8, a scale per output channel computed from the weights (oneDNN's
//     rnn_weights_qparams with mask (d, g, o): W_ih and W_hh share their row's scale, 127 / the
//     row's largest |w|, 63 on CPUs without VNNI: weight_max()); one primitive per layer, as the
//     scales are its attribute; reordered into oneDNN's format once, at construction.
//   int32 accumulation, FP32 biases, peepholes and c; y of the top layer FP32.
// A forward call quantizes x and hx to u8 and dequantizes hy (oneDNN's int8 dst_iter is u8),
// then runs one primitive per layer (the layers between them exchange u8 outputs).
// Cells: what oneDNN runs in int8 (2.6.3 and 3.2.0 on AVX2: LSTM and its vanilla GRU = rnnjit's
// gru_reset_before; no lbr_gru = rnnjit's gru, vanilla RNN or peephole LSTM; peepholes are passed
// on where a oneDNN takes them). Whatever oneDNN
// refuses (a cell, a CPU without its int8 RNN) and what the FP32 peer refuses (plus projections,
// whose s8 weights this peer does not model, and summed directions, whose sum would leave the u8
// range of h between layers) is an Error that says so.
class OnednnInt8Rnn {
 public:
  OnednnInt8Rnn(const RnnConfig& config, const Shape& shape, std::span<const float> canonical_weights,
                std::span<const float> x, int threads = 0);
  OnednnInt8Rnn(OnednnInt8Rnn&&) noexcept;
  OnednnInt8Rnn& operator=(OnednnInt8Rnn&&) noexcept;
  ~OnednnInt8Rnn();

  const RnnConfig& config() const;
  Shape shape() const;
  PeerRun run_info() const;
  // The data quantization: u8 = round(scale * v + shift), saturated to 0..255.
  float data_scale() const;
  float data_shift() const;
  // The weights' largest |s8|: 127, or 63 (7 bits) where oneDNN's int8 GEMMs have no VNNI and
  // multiply with vpmaddubsw, whose int16 sums of two products would saturate.
  int weight_max() const;

  // Inference forward, sizes as OnednnRnn::forward's (FP32 buffers; hx, cx, hy, cy optional).
  void forward(const ForwardIo& io);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rnnjit::bench
