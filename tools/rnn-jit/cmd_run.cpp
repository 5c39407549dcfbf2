// rnn-jit run: one forward pass (and, with --dy, backward data and backward weights) of a
// network whose parameters and inputs are .npy files, writing the results as .npy files.
//
//   --params DIR   one float32 .npy per parameter, named as PyTorch's state_dict keys
//                  (weight_ih_l0.npy, bias_hh_l1_reverse.npy, ...) with PyTorch's shapes
//   --x X.npy      [T, N, I] ([N, T, I] with --batch-first); T and N come from its shape
//   --h0/--c0      [L*D, N, S] / [L*D, N, H] initial states (default zeros; --c0 for LSTM only),
//                  S being the projection size with --proj-size, else H
//   --seq-lengths  [N] int32 or int64 lengths in [1, T] (variable-length sequences)
//   --seed S       the dropout seed (with --dropout, training only)
//   --out DIR      receives y.npy [T, N, Y] (batch-first: [N, T, Y]; Y = D*S, or S with --direction
//                  bidirectional_sum), hy.npy, cy.npy (LSTM)
//   --dy DY.npy    shaped as y: also run backward and write dx.npy, dh0.npy, dc0.npy (LSTM) and
//                  grad_<name>.npy for every parameter; --dhy/--dcy default to zeros
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "rnnjit/npy.hpp"
#include "rnnjit/rnn.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

namespace fs = std::filesystem;

struct RunFlags {
  ConfigFlags config;
  BackendFlags backend;
  std::string params, x, h0, c0, out, dy, dhy, dcy, seq_lengths;
  std::uint64_t seed = 0;
};

// Lengths of any integer width the .npy reader knows, as the API's int32.
std::vector<std::int32_t> read_lengths(const std::string& path, std::int64_t batch) {
  const npy::Array a = npy::read(path);
  npy::expect_shape(a, {batch}, path);
  if (a.dtype == npy::DType::i32) return npy::as_i32(a, path);
  if (a.dtype != npy::DType::i64)
    throw Error(fmt::format("{}: sequence lengths must be int32 or int64, got {}", path, npy::type_name(a.dtype)));
  std::vector<std::int32_t> lengths;
  for (const std::int64_t v : npy::as_i64(a, path)) {
    if (v < 1 || v > std::numeric_limits<std::int32_t>::max())
      throw Error(fmt::format("{}: sequence length {} is not positive", path, v));
    lengths.push_back(static_cast<std::int32_t>(v));
  }
  return lengths;
}

std::vector<float> read_optional(const std::string& path, const std::vector<std::int64_t>& shape) {
  if (path.empty()) return {};
  return npy::read_f32(path, shape);
}

int run(const RunFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Options options = build_options(f.backend);
  const bool lstm = config.cell == CellKind::lstm;
  if (!lstm && !f.c0.empty()) throw UsageError("--c0 is only valid with --cell lstm");
  if (!lstm && !f.dcy.empty()) throw UsageError("--dcy is only valid with --cell lstm");
  const bool backward = !f.dy.empty();

  // x gives T and N.
  const npy::Array xa = npy::read(f.x);
  npy::expect_dtype(xa, npy::DType::f32, f.x);
  if (xa.shape.size() != 3 || xa.shape[2] != config.input_size)
    throw Error(fmt::format("{}: shape {} does not match expected ({}, {}) for --input-size {}", f.x,
                            npy::shape_string(xa.shape), config.batch_first ? "N, T" : "T, N", config.input_size,
                            config.input_size));
  const Shape shape = config.batch_first ? Shape{xa.shape[1], xa.shape[0]} : Shape{xa.shape[0], xa.shape[1]};
  if (shape.seq_len <= 0 || shape.batch <= 0)
    throw Error(fmt::format("{}: shape {} has no time steps or no batch", f.x, npy::shape_string(xa.shape)));
  try {
    validate(config, shape);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", f.x, e.what()));
  }
  const std::vector<float> x = npy::as_f32(xa, f.x);

  const std::int64_t L = config.num_layers, D = config.directions(), H = config.hidden_size, S = config.state_size();
  const std::int64_t T = shape.seq_len, N = shape.batch, Y = config.output_size();
  const std::vector<std::int64_t> state_shape{L * D, N, S}, cell_shape{L * D, N, H};
  const std::vector<std::int64_t> y_shape = config.batch_first ? std::vector<std::int64_t>{N, T, Y}
                                                               : std::vector<std::int64_t>{T, N, Y};
  const std::vector<std::int32_t> lengths = f.seq_lengths.empty() ? std::vector<std::int32_t>{}
                                                                   : read_lengths(f.seq_lengths, N);

  // Parameters, by PyTorch name, into the canonical buffer.
  const Rnn rnn(config, options);
  const WeightLayout& layout = rnn.weight_layout();
  std::vector<float> weights(static_cast<std::size_t>(layout.total_elements()));
  for (const ParamBlock& b : layout.blocks()) {
    const std::string path = (fs::path(f.params) / (b.name + ".npy")).string();
    std::error_code ec;
    const bool bias = b.kind == ParamKind::bias_ih || b.kind == ParamKind::bias_hh;
    if (!fs::is_regular_file(path, ec))
      throw Error(fmt::format("{}: missing parameter file for '{}' ({} expects shape {}{})", path, b.name,
                              describe(config), npy::shape_string(b.shape),
                              bias ? "; a network without biases takes --no-bias" : ""));
    const std::vector<float> values = npy::read_f32(path, b.shape);
    std::copy(values.begin(), values.end(), weights.begin() + b.offset);
  }
  // Bias files beside --no-bias: the network and the parameters disagree, so say so.
  for (std::int64_t l = 0; l < config.num_layers && !config.bias; ++l)
    for (int d = 0; d < config.directions(); ++d)
      for (ParamKind kind : {ParamKind::bias_ih, ParamKind::bias_hh}) {
        const std::string path = (fs::path(f.params) / (param_name(kind, l, d) + ".npy")).string();
        std::error_code ec;
        if (fs::exists(path, ec))
          throw Error(fmt::format("{}: a bias parameter, but --no-bias says the network has none", path));
      }

  const std::vector<float> h0 = read_optional(f.h0, state_shape);
  const std::vector<float> c0 = read_optional(f.c0, cell_shape);
  const std::vector<float> dy = read_optional(f.dy, y_shape);
  const std::vector<float> dhy = read_optional(f.dhy, state_shape);
  const std::vector<float> dcy = read_optional(f.dcy, cell_shape);

  std::error_code ec;
  fs::create_directories(f.out, ec);
  if (ec || !fs::is_directory(f.out))
    throw Error(fmt::format("{}: cannot create output directory: {}", f.out,
                            ec ? ec.message() : std::string("not a directory")));
  auto out_path = [&](const std::string& file) { return (fs::path(f.out) / file).string(); };

  Execution ex = rnn.prepare(shape, backward ? Mode::training : Mode::inference);

  const auto states = static_cast<std::size_t>(L * D * N * S), cells = static_cast<std::size_t>(L * D * N * H);
  std::vector<float> y(static_cast<std::size_t>(T * N * Y)), hy(states), cy(lstm ? cells : 0);
  ex.forward(weights, {.x = x, .hx = h0, .cx = c0, .y = y, .hy = hy, .cy = cy, .seq_lengths = lengths,
                       .dropout_seed = f.seed});
  int files = 0;
  auto emit = [&](const std::string& file, const std::vector<std::int64_t>& file_shape, std::span<const float> data) {
    npy::write_f32(out_path(file), file_shape, data);
    ++files;
  };
  emit("y.npy", y_shape, y);
  emit("hy.npy", state_shape, hy);
  if (lstm) emit("cy.npy", cell_shape, cy);

  if (backward) {
    std::vector<float> dx(x.size()), dh0(states), dc0(lstm ? cells : 0);
    ex.backward_data(weights, {.dy = dy, .dhy = dhy, .dcy = dcy, .dx = dx, .dhx = dh0, .dcx = dc0});
    std::vector<float> dw(weights.size());
    ex.backward_weights({.x = x, .dweights = dw});
    emit("dx.npy", xa.shape, dx);
    emit("dh0.npy", state_shape, dh0);
    if (lstm) emit("dc0.npy", cell_shape, dc0);
    for (const ParamBlock& b : layout.blocks())
      emit("grad_" + b.name + ".npy", b.shape,
           std::span<const float>(dw).subspan(static_cast<std::size_t>(b.offset), static_cast<std::size_t>(b.size)));
  }

  fmt::print("rnn-jit run: {}, {}, {}, backend {}: wrote {} files to {}\n", describe(config), describe(shape),
             backward ? "forward+backward" : "forward", to_string(ex.backend()), files, f.out);
  return kExitOk;
}

CommandAction setup_run(CLI::App& sub) {
  auto f = std::make_shared<RunFlags>();
  add_config_flags(sub, f->config, /*required=*/true);
  sub.add_option("--params", f->params, "directory of float32 .npy files named as PyTorch's state_dict keys")
      ->required();
  sub.add_option("--x", f->x, "input sequence [T, N, I] ([N, T, I] with --batch-first; .npy, float32)")->required();
  sub.add_option("--h0", f->h0, "initial hidden state [L*D, N, S] (S = --proj-size or H; default zeros)");
  sub.add_option("--c0", f->c0, "initial cell state [L*D, N, H] (LSTM; default zeros)");
  sub.add_option("--seq-lengths", f->seq_lengths, "sequence lengths [N] in [1, T] (.npy, int32 or int64)");
  sub.add_option("--seed", f->seed, "dropout seed (with --dropout)")->capture_default_str();
  sub.add_option("--out", f->out, "output directory (created if missing)")->required();
  CLI::Option* dy = sub.add_option("--dy", f->dy, "output gradient, shaped as y: also run backward");
  sub.add_option("--dhy", f->dhy, "gradient of hy [L*D, N, S] (default zeros)")->needs(dy);
  sub.add_option("--dcy", f->dcy, "gradient of cy [L*D, N, H] (LSTM; default zeros)")->needs(dy);
  add_backend_flags(sub, f->backend);
  return [f] { return run(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(run, "run a network on .npy inputs and parameters, writing .npy outputs (and gradients)",
                   setup_run);

}  // namespace rnnjit::cli
