// rnn-jit demo: a short tour of rnnjit on the LSTM of DeepSpeech2 (T=300, N=20, I=H=800, one
// layer) with random weights (uniform in +-1/sqrt(H), fixed seed):
//   1. the plan: its kernels and the workspace/reserve totals (`rnn-jit plan` prints every step);
//   2. the first lines of the forward gate kernel's generated code (`rnn-jit dump` prints all);
//   3. a check of the backend (default: jit, the generated code) against the scalar reference on
//      the first --check-seq time steps, same weights and inputs: the full DS2 reference takes
//      ~30 s. Prints the largest errors and PASS, or FAIL and exits 1;
//   4. the time of the full shape through the backend, and against the baseline measured in the
//      same run: the same schedule with OpenBLAS and plain C++ gate loops (Isa::reference, MXNet's
//      CPU design), and the reference's time on the check's steps scaled per step to T.
// Every size is a flag, so the same tour runs other shapes; --mode train adds both backward passes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "codegen/plan.hpp"
#include "rnnjit/rnn.hpp"
#include "runtime/cache.hpp"
#include "runtime/kernel.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

struct DemoFlags {
  ConfigFlags config = ds2_config_flags();
  ShapeFlags shape = ds2_shape_flags();
  BackendFlags backend{.backend = "auto"};
  std::string isa;  // empty: detected
  std::int64_t check_seq = 8;
  int repeats = 3;
  int asm_lines = 25;
  std::uint64_t seed = 1;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void fill_uniform(std::vector<float>& v, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (float& e : v) e = dist(rng);
}

std::string bytes_text(std::size_t bytes) {
  if (bytes < 10 * 1024) return fmt::format("{} bytes", bytes);
  return fmt::format("{} bytes ({:.1f} MiB)", bytes, static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// ---- the problem: weights and call tensors, for a shape or its first T steps ----

struct Tensors {
  std::vector<float> x, y, hy, cy, dy, dx, dw;
};

struct Problem {
  RnnConfig config;
  Shape shape;
  Mode mode;
  std::vector<float> weights, x, dy;  // x and dy of the full shape; sequence-major, so a prefix is a shorter call

  std::size_t states() const { return static_cast<std::size_t>(state_elements(config, shape)); }
  bool lstm() const { return config.cell == CellKind::lstm; }

  // Runs one call of `steps` time steps (forward, and both backward passes when `ex` trains).
  Tensors run(Execution& ex, std::int64_t steps) const {
    const Shape s{steps, shape.batch};
    Tensors t;
    t.x.assign(x.begin(), x.begin() + x_elements(config, s));
    t.y.resize(static_cast<std::size_t>(y_elements(config, s)));
    t.hy.resize(states());
    t.cy.resize(lstm() ? states() : 0);
    ForwardIo fio;
    fio.x = t.x;
    fio.y = t.y;
    fio.hy = t.hy;
    fio.cy = t.cy;
    ex.forward(weights, fio);
    if (ex.mode() == Mode::training) {
      t.dy.assign(dy.begin(), dy.begin() + y_elements(config, s));
      t.dx.resize(t.x.size());
      t.dw.resize(weights.size());
      BackwardDataIo bio;
      bio.dy = t.dy;
      bio.dx = t.dx;
      ex.backward_data(weights, bio);
      ex.backward_weights({.x = t.x, .dweights = t.dw});
    }
    return t;
  }

  // Float rounding grows with the terms each result accumulates (as in tests/rnn_case.hpp): a dot
  // product of max(I, D*H) + H terms per step, through T steps and L layers; the weight gradients
  // also sum over the N rows and back through time.
  double tolerance(std::int64_t steps, bool gradient) const {
    const double eps = std::numeric_limits<float>::epsilon();
    const double width =
        static_cast<double>(std::max(config.input_size, config.directions() * config.hidden_size) + config.hidden_size);
    double depth = width * static_cast<double>(steps * config.num_layers);
    if (gradient) depth *= 2.0 + static_cast<double>(shape.batch);
    return 4.0 * eps * std::sqrt(depth) * std::sqrt(width) + 8.0 * eps;
  }

  // int8 against the int8 reference (docs/quantization.md): the gate kernels' activations,
  // which differ from the reference's in the last bits, may move an h across a rounding boundary
  // of its quantization, changing a product by one step, max|w| * max|activation| / 127: 4 such
  // steps a layer beside the FP32 tolerance.
  double int8_tolerance(std::int64_t steps) const {
    auto most = [](const std::vector<float>& v) {
      float m = 1.0f;  // h and c are O(1)
      for (float e : v) m = std::max(m, std::fabs(e));
      return static_cast<double>(m);
    };
    const double step = most(weights) * most(x) / 127.0;
    return tolerance(steps, false) + 4.0 * step * static_cast<double>(config.num_layers);
  }
};

// Largest |a - b| / (1 + |b|) (absolute near 0, relative for large values) and largest |a - b|.
struct Error2 {
  double mixed = 0, abs = 0;
};
Error2 compare(const std::vector<float>& a, const std::vector<float>& b) {
  Error2 e;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    e.abs = std::fmax(e.abs, d);
    e.mixed = std::fmax(e.mixed, d / (1.0 + std::fabs(static_cast<double>(b[i]))));
    if (std::isnan(a[i]) != std::isnan(b[i])) e.mixed = e.abs = std::numeric_limits<double>::infinity();
  }
  return e;
}

// ---- 1. the plan ----

void show_plan(const Plan& p) {
  fmt::print("\n1. the plan (isa {}; `rnn-jit plan` prints every step, descriptor and region)\n", to_string(p.isa));
  for (const std::string& note : p.notes) fmt::print("  note: {}\n", note);
  std::vector<std::string> names;
  for (const KernelDesc& d : p.kernels) {
    const std::string name = kernel_name(d);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  fmt::print("  {} kernel{}:\n", names.size(), names.size() == 1 ? "" : "s");
  constexpr std::size_t kShown = 8;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) fmt::print("    {}\n", names[i]);
  if (names.size() > kShown) fmt::print("    ... and {} more\n", names.size() - kShown);
  auto count = [](const std::vector<Stage>& stages) {
    std::size_t steps = 0, loops = 0;
    for (const Stage& s : stages)
      for (const auto& lane : s.lanes)
        for (const Step& step : lane) {
          ++steps;
          if (std::holds_alternative<RecurrenceStep>(step)) ++loops;
        }
    return std::pair{steps, loops};
  };
  const auto [fwd_steps, fwd_loops] = count(p.forward);
  fmt::print("  forward: {} steps, {} of them time loops of {} steps", fwd_steps, fwd_loops, p.shape.seq_len);
  if (p.mode == Mode::training) {
    fmt::print("; backward data: {} steps; backward weights: {} steps", count(p.backward_data).first,
               count(p.backward_weights).first);
  }
  std::size_t region_bytes = 0;
  for (const Region& r : p.workspace.regions) region_bytes += r.size;
  fmt::print("\n  {} regions, {} in all: workspace {}, reserve {}\n", p.workspace.regions.size(),
             bytes_text(region_bytes), bytes_text(p.workspace.workspace_bytes), bytes_text(p.workspace.reserve_bytes));
}

// ---- 2. generated code ----

// The forward gate kernel of the network's cell (its name starts with "<cell>_fwd"), else the first.
const KernelDesc* gate_kernel(const Plan& p) {
  const std::string prefix = fmt::format("{}_fwd", to_string(p.config.cell));
  for (const KernelDesc& d : p.kernels)
    if (kernel_name(d).starts_with(prefix)) return &d;
  return p.kernels.empty() ? nullptr : &p.kernels.front();
}

void show_code(const Plan& p, int max_lines) {
  const KernelDesc* desc = gate_kernel(p);
  if (!desc) {
    fmt::print("\n2. generated code: the plan has no kernels\n");
    return;
  }
  const std::shared_ptr<const CompiledKernel> k = Cache::instance().kernel(*desc);
  fmt::print("\n2. generated code of {}\n", k->name());
  fmt::print("  ({})\n", describe(*desc));
  if (k->code().empty()) {
    fmt::print("  no generated code for isa {}: the scalar reference twin (kernels/) runs instead\n",
               to_string(desc->isa_kind()));
    return;
  }
  fmt::print("  {} bytes ({} of instructions); the first {} lines of its disassembly (`rnn-jit dump --kernel "
             "<name>` with the same flags prints it all):\n",
             k->code().size(), k->text_size(), max_lines);
  std::istringstream lines(k->disassembly());
  std::string line;
  int shown = 0, total = 0;
  while (std::getline(lines, line)) {
    if (shown < max_lines) {
      fmt::print("    {}\n", line);
      ++shown;
    }
    ++total;
  }
  if (total > shown) fmt::print("    ... {} more lines\n", total - shown);
}

// ---- 3. check against the reference ----

// Returns the reference's time for its forward call of `steps` steps (ms), or a negative value
// when the backend is the reference itself.
double check(const Problem& pb, const Rnn& rnn, std::int64_t steps) {
  const Shape s{steps, pb.shape.batch};
  fmt::print("\n3. check: {} against the scalar reference on the first {} of {} time steps (same weights and "
             "inputs)\n",
             to_string(rnn.options().backend), steps, pb.shape.seq_len);
  if (rnn.options().backend == Backend::reference) {
    fmt::print("  the backend is the reference itself: nothing to compare\n");
    return -1.0;
  }
  Execution ex = rnn.prepare(s, pb.mode);
  const Tensors got = pb.run(ex, steps);

  // An int8 plan is checked against the int8 reference, which quantizes as its GEMMs do.
  const bool int8 = ex.plan().quantize == Quantize::int8_dynamic;
  if (int8) fmt::print("  (quantize int8: against the scalar int8 reference)\n");
  const Rnn ref_rnn(pb.config, Options{.backend = Backend::reference, .isa = Isa::reference,
                                       .quantize = int8 ? Quantize::int8_dynamic : Quantize::none});
  Execution ref_ex = ref_rnn.prepare(s, Mode::inference);
  auto start = Clock::now();
  Tensors want = pb.run(ref_ex, steps);  // forward only: timed for the estimate in 4.
  const double ref_ms = ms_since(start);
  if (pb.mode == Mode::training) {
    Execution ref_train = ref_rnn.prepare(s, Mode::training);
    want = pb.run(ref_train, steps);
  }

  bool pass = true;
  double worst = 0, worst_tol = 1;
  auto row = [&](const char* what, const std::vector<float>& a, const std::vector<float>& b, bool gradient) {
    if (b.empty()) return;
    const Error2 e = compare(a, b);
    const double tol = int8 ? pb.int8_tolerance(steps) : pb.tolerance(steps, gradient);
    const bool ok = e.mixed <= tol;
    pass = pass && ok;
    if (e.mixed / tol >= worst / worst_tol) {
      worst = e.mixed;
      worst_tol = tol;
    }
    fmt::print("  {:<9} max-abs-error {:.3e}  max |err|/(1+|ref|) {:.3e}  tolerance {:.3e}  {}\n", what, e.abs,
               e.mixed, tol, ok ? "ok" : "TOO LARGE");
  };
  row("y", got.y, want.y, false);
  row("hy", got.hy, want.hy, false);
  row("cy", got.cy, want.cy, false);
  row("dx", got.dx, want.dx, true);
  row("dweights", got.dw, want.dw, true);
  fmt::print("{}\n", int8 ? "  (tolerance: 4 quantization steps of one product a layer, max|w| max|x| / 127, beside FP32's)"
                          : "  (tolerance: 4 eps sqrt(depth) sqrt(width), from the accumulation depth of each result)");
  if (!pass) {
    fmt::print("  FAIL\n");
    throw Error(fmt::format("demo check failed: {} differs from the reference by {:.3e} (tolerance {:.3e})",
                            to_string(rnn.options().backend), worst, worst_tol));
  }
  fmt::print("  PASS\n");
  return ref_ms;
}

// ---- 4. timing of the full shape ----

struct Timing {
  double forward = 0, backward_data = 0, backward_weights = 0;  // best of the timed runs, ms
  int runs = 0;                                                  // timed runs
  bool warmed_up = false;                                        // after a dropped warm-up run
  std::vector<float> y;
};

// The first run warms up (first touch of buffers, packing, thread start-up) and is dropped, then
// up to `repeats` timed runs, stopping early once `budget_ms` is spent: the demo stays short on a
// slow or busy machine. A first run longer than the budget is kept as the only timed run (its
// warm-up costs are small next to it).
Timing time_runs(const Problem& pb, Execution& ex, int repeats, double budget_ms) {
  const Shape& s = pb.shape;
  std::vector<float> y(static_cast<std::size_t>(y_elements(pb.config, s))), hy(pb.states()),
      cy(pb.lstm() ? pb.states() : 0), dx, dw;
  if (pb.mode == Mode::training) {
    dx.resize(pb.x.size());
    dw.resize(pb.weights.size());
  }
  ForwardIo fio;
  fio.x = pb.x;
  fio.y = y;
  fio.hy = hy;
  fio.cy = cy;
  BackwardDataIo bio;
  bio.dy = pb.dy;
  bio.dx = dx;
  Timing t;
  t.forward = t.backward_data = t.backward_weights = std::numeric_limits<double>::infinity();
  const auto begin = Clock::now();
  for (int r = 0;; ++r) {
    auto start = Clock::now();
    ex.forward(pb.weights, fio);
    const double f = ms_since(start);
    double bd = 0, bw = 0;
    if (pb.mode == Mode::training) {
      start = Clock::now();
      ex.backward_data(pb.weights, bio);
      bd = ms_since(start);
      start = Clock::now();
      ex.backward_weights({.x = pb.x, .dweights = dw});
      bw = ms_since(start);
    }
    const double spent = ms_since(begin);
    if (r > 0 || spent >= budget_ms) {
      t.warmed_up = r > 0;
      t.forward = std::min(t.forward, f);
      t.backward_data = std::min(t.backward_data, bd);
      t.backward_weights = std::min(t.backward_weights, bw);
      ++t.runs;
    }
    if (t.runs >= repeats || (t.runs > 0 && spent >= budget_ms)) break;
  }
  t.y = std::move(y);
  return t;
}

void report(const std::string& who, const char* pass, double ms, double flops, const std::string& how = "") {
  fmt::print("  {:<31} {:<16} {:10.2f} ms {:8.2f} GFLOPS{}{}\n", who, pass, ms, ms > 0 ? flops / (ms * 1e6) : 0.0,
             how.empty() ? "" : "  ", how);
}

// A ratio under a timing table.
void ratio(const std::string& who, double x, const char* what) {
  fmt::print("  {:<31} {:<16} {:10.2f}x {}\n", who, "", x, what);
}

void report_all(const std::string& who, const Timing& t, const Problem& pb, double fwd_flops) {
  const std::string how = t.runs == 1 ? fmt::format("(1 run{})", t.warmed_up ? " after a warm-up" : ", no warm-up")
                                      : fmt::format("(best of {} runs after a warm-up)", t.runs);
  report(who, "forward", t.forward, fwd_flops, how);
  if (pb.mode == Mode::training) {
    // Backward data (dx and dh GEMMs) and backward weights (dW_ih and dW_hh) each cost as many
    // FLOPs as the forward GEMMs.
    report(who, "backward data", t.backward_data, fwd_flops);
    report(who, "backward weights", t.backward_weights, fwd_flops);
  }
}

void checksum(const char* what, const std::vector<float>& v) {
  double sum = 0, max_abs = 0;
  for (float e : v) {
    sum += e;
    max_abs = std::fmax(max_abs, std::fabs(static_cast<double>(e)));
  }
  fmt::print("  {:<31} {:<16} sum {:+.6e}  max|.| {:.6e}\n", "checksum", what, sum, max_abs);
}

void show_timing(const Problem& pb, const Rnn& rnn, Execution& ex, int repeats, double ref_ms, std::int64_t steps) {
  const Backend backend = rnn.options().backend;
  const bool reference = backend == Backend::reference;
  const double fwd_flops = forward_flops(pb.config, pb.shape);
  constexpr double kBudgetMs = 3000;  // per backend
  fmt::print("\n4. timing of the full shape ({}, {}: {:.2f} GFLOP per forward pass)\n",
             describe(pb.shape), to_string(pb.mode), fwd_flops * 1e-9);
  const std::string who =
      reference ? "reference" : fmt::format("{} ({})", to_string(backend), to_string(rnn.options().isa));
  // The reference is slow (~30 s for DS2): the budget makes it a single run.
  const Timing mine = time_runs(pb, ex, repeats, kBudgetMs);
  report_all(who, mine, pb, fwd_flops);
  if (reference) {
    checksum("y", mine.y);
    return;
  }

  if (rnn.options().isa != Isa::reference) {
    // The baseline: the same schedule with OpenBLAS GEMMs and the gates as plain C++ loops.
    const Rnn base_rnn(pb.config, Options{Backend::jit, Isa::reference});
    Execution base_ex = base_rnn.prepare(pb.shape, pb.mode);
    const Timing base = time_runs(pb, base_ex, repeats, kBudgetMs);
    report_all("baseline (OpenBLAS + C++ gates)", base, pb, fwd_flops);
    ratio(who, base.forward / mine.forward, "the baseline's speed (forward)");
    if (pb.mode == Mode::training)
      ratio(who,
            (base.forward + base.backward_data + base.backward_weights) /
                (mine.forward + mine.backward_data + mine.backward_weights),
            "the baseline's speed (forward + backward)");
  } else {
    fmt::print("  (isa reference: this backend is the baseline, OpenBLAS + C++ gate loops)\n");
  }
  if (ref_ms >= 0) {
    const double scale = static_cast<double>(pb.shape.seq_len) / static_cast<double>(steps);
    const double est = ref_ms * scale;
    const bool scaled = steps != pb.shape.seq_len;
    report(scaled ? "reference (estimate)" : "reference", "forward", est, fwd_flops,
           scaled ? fmt::format("(measured on {} steps in 3., x{:.4g} per step to T={})", steps, scale,
                                pb.shape.seq_len)
                  : std::string("(1 run in 3.)"));
    ratio(who, est / mine.forward, scaled ? "the reference's speed (forward, estimated)" : "the reference's speed (forward)");
  }
  checksum("y", mine.y);
}

int demo(const DemoFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  Options options = build_options(f.backend);
  options.isa = build_isa(f.isa);
  validate_flags(config, shape);
  if (f.check_seq <= 0) throw UsageError(fmt::format("--check-seq must be positive, got {}", f.check_seq));
  if (f.repeats <= 0) throw UsageError(fmt::format("--repeats must be positive, got {}", f.repeats));
  if (f.asm_lines < 0) throw UsageError(fmt::format("--asm-lines must not be negative, got {}", f.asm_lines));

  const Rnn rnn(config, options);
  Problem pb{config, shape, mode, {}, {}, {}};
  const float bound = 1.0f / std::sqrt(static_cast<float>(config.hidden_size));
  std::mt19937_64 rng(f.seed);
  pb.weights.resize(static_cast<std::size_t>(rnn.weights_size()));
  pb.x.resize(static_cast<std::size_t>(x_elements(config, shape)));
  fill_uniform(pb.weights, bound, rng);
  fill_uniform(pb.x, 1.0f, rng);
  if (mode == Mode::training) {
    pb.dy.resize(static_cast<std::size_t>(y_elements(config, shape)));
    fill_uniform(pb.dy, 1.0f, rng);
  }

  fmt::print("rnn-jit demo: {}, {}, {}\n", describe(config), describe(shape), to_string(mode));
  fmt::print("  weights: {} parameters, uniform in +-{:.6f} (1/sqrt(H)), seed {}\n", rnn.weights_size(), bound, f.seed);
  auto start = Clock::now();
  Execution ex = rnn.prepare(shape, mode);
  fmt::print("  backend {} (requested {}), isa {}: planned and compiled in {:.2f} ms\n", to_string(ex.backend()),
             f.backend.backend, to_string(rnn.options().isa), ms_since(start));

  show_plan(ex.plan());
  show_code(ex.plan(), f.asm_lines);
  const std::int64_t steps = std::min(f.check_seq, shape.seq_len);
  const double ref_ms = check(pb, rnn, steps);
  show_timing(pb, rnn, ex, f.repeats, ref_ms, steps);
  return kExitOk;
}

CommandAction setup_demo(CLI::App& sub) {
  auto f = std::make_shared<DemoFlags>();
  add_config_flags(sub, f->config, /*required=*/false);
  add_shape_flags(sub, f->shape, /*required=*/false);
  add_backend_flags(sub, f->backend);
  add_isa_flag(sub, f->isa);
  sub.add_option("--check-seq", f->check_seq, "time steps of the check against the reference")->capture_default_str();
  sub.add_option("--repeats", f->repeats, "timed runs of the full shape per backend, at most (the best is shown)")->capture_default_str();
  sub.add_option("--asm-lines", f->asm_lines, "lines of the gate kernel's disassembly to show")->capture_default_str();
  sub.add_option("--seed", f->seed, "seed of the random weights and inputs")->capture_default_str();
  sub.footer(
      "A tour on the DeepSpeech2 LSTM: the plan, the generated code, a check against the reference on the first "
      "--check-seq steps, and the time of the full shape against the baseline (OpenBLAS + C++ gate loops) and the "
      "reference (estimated per step).");
  return [f] { return demo(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(demo, "a tour: plan, generated code, check and timing of the DeepSpeech2 LSTM (T=300 N=20 I=H=800)",
                   setup_demo);

}  // namespace rnnjit::cli
