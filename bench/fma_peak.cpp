#include "bench/fma_peak.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "codegen/x64/jit_generator.hpp"
#include "codegen/x64/vector_isa.hpp"

namespace rnnjit::bench {
namespace {

constexpr long kInnerRounds = 1 << 16;

// `rounds` (the long its argument points at) rounds of one FMA on each chain, generated for the
// ISA's registers as the kernels are, so the probe measures exactly their instruction: chains
// acc_i += a * b in registers 0 .. chains-1, a and b the next two. Zeros throughout (no
// denormals to slow it).
class FmaLoop final : public x64::JitGenerator {
 public:
  explicit FmaLoop(Isa isa) : isa_(x64::vector_isa(isa)), chains_(isa_.opmask ? 24 : isa_.registers - 2) {
    const Xbyak::Xmm a = isa_.vreg(chains_), b = isa_.vreg(chains_ + 1);
    for (int i = 0; i < chains_ + 2; ++i) vxorps(isa_.vreg(i), isa_.vreg(i), isa_.vreg(i));
    mov(rax, ptr[abi_arg]);
    Xbyak::Label loop;
    L(loop);
    for (int i = 0; i < chains_; ++i) vfmadd231ps(isa_.vreg(i), a, b);
    dec(rax);
    jnz(loop, T_NEAR);
    vzeroupper();
    ret();
    finalize();
  }
  double flops_per_round() const { return 2.0 * chains_ * isa_.lanes; }

 private:
  x64::VectorIsa isa_;
  int chains_;
};

}  // namespace

double measure_fma_peak(int threads, double seconds, Isa isa) {
  if (isa != Isa::avx512 && isa != Isa::avx2) return 0.0;
  const FmaLoop probe(isa);
  std::atomic<long> rounds_done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const long rounds = kInnerRounds;
        probe.entry()(&rounds);
        rounds_done.fetch_add(kInnerRounds, std::memory_order_relaxed);
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(rounds_done.load()) * probe.flops_per_round() / elapsed / 1e9;
}

}  // namespace rnnjit::bench
