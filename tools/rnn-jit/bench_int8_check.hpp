// rnn-jit bench: the check that oneDNN's int8 peer (onednn_int8) computes the benchmark's network
// before it is timed: its y against rnnjit's FP32 plan's on the same weights and x, within what
// quantizing both operands of every product costs (the bound of tests/test_int8_rnn.cpp: rounding
// errors uniform in half a step each side, so a dot product of K terms errs with a standard
// deviation of sqrt(K / 12) * sqrt(2) * max|a| * max|w| / 127; 6 of them, grown by sqrt(T * L);
// with 7-bit weights, the peer's on CPUs without VNNI, the weights' half of it doubles).
#pragma once

#include <span>
#include <string>

#include "bench/onednn_peer.hpp"
#include "rnnjit/config.hpp"

namespace rnnjit::cli {

// Runs `peer` and rnnjit's FP32 plan (reference ISA choice: Options' defaults, threads as given)
// once each on `weights` and `x`; returns "max |y - rnnjit FP32| E (int8 bound B)" or throws
// rnnjit::Error saying by how much the peer is off when E > B.
std::string check_int8_peer(const RnnConfig& config, const Shape& shape, std::span<const float> weights,
                            std::span<const float> x, int threads, bench::OnednnInt8Rnn& peer);

}  // namespace rnnjit::cli
