// libFuzzer target: bytes -> argv for the rnn-jit command line.
//
// The input is split at '\0' and '\n' into at most 24 arguments (fuzz/cli_input.hpp). They go
// through what tools/rnn-jit/main.cpp does before it runs a subcommand: the same CLI::App with
// every registered subcommand (tools/rnn-jit/cmd_*.cpp, linked in whole), the check of the words
// before the subcommand, CLI11's parse and the extras check. The values the parse accepted then go through the
// flag-building functions of cli_common.hpp (build_config, build_shape, build_mode, validate_flags,
// build_options, build_isa), and two subcommands that neither time anything nor touch files run
// for real on small sizes: `plan`, and `dump` without -o (stdout goes to /dev/null).
//
// Allowed outcomes: CLI::ParseError (CLI11's usage errors), rnnjit::cli::UsageError and
// rnnjit::Error. Anything else escaping (another exception type, a crash, a sanitizer report) is
// a finding.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz/cli_input.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace {

using namespace rnnjit;
using namespace rnnjit::cli;

// The value of an option the parse accepted, if it was given.
template <typename T>
void take(CLI::App& sub, const char* name, T& value) {
  const CLI::Option* o = sub.get_option_no_throw(name);
  if (o != nullptr && o->count() > 0) value = o->as<T>();
}

// Planning and (for dump) compiling stay cheap below these sizes.
bool small(const RnnConfig& c, const Shape& s, bool compiles) {
  if (compiles)
    return c.input_size <= 64 && c.hidden_size <= 64 && c.num_layers <= 2 && s.seq_len <= 8 && s.batch <= 8;
  return c.input_size <= 4096 && c.hidden_size <= 4096 && c.num_layers <= 8 && s.seq_len <= 4096 && s.batch <= 4096;
}

// The parsed flags, through the functions the subcommands build their arguments with.
void build_from_flags(CLI::App& sub, const CommandAction& action) {
  ConfigFlags config = ds2_config_flags();
  ShapeFlags shape = ds2_shape_flags();
  BackendFlags backend;
  std::string isa, target, out;
  take(sub, "--cell", config.cell);
  take(sub, "--input-size", config.input_size);
  take(sub, "--hidden-size", config.hidden_size);
  take(sub, "--layers", config.layers);
  take(sub, "--bidirectional", config.bidirectional);
  take(sub, "--direction", config.direction);
  take(sub, "--no-bias", config.no_bias);
  take(sub, "--independent-stacks", config.independent_stacks);
  take(sub, "--seq", shape.seq);
  take(sub, "--batch", shape.batch);
  take(sub, "--mode", shape.mode);
  take(sub, "--backend", backend.backend);
  take(sub, "--fpmath", backend.fpmath);
  take(sub, "--quantize", backend.quantize);
  take(sub, "--isa", isa);
  take(sub, "--target", target);
  take(sub, "--output-dir", out);

  const RnnConfig c = build_config(config);
  const Shape s = build_shape(shape);
  (void)build_mode(shape);
  validate_flags(c, s);
  (void)build_options(backend);
  (void)build_isa(isa);
  if (target != "cuda") (void)build_isa(target, "--target");

  const std::string name = sub.get_name();
  if (name == "plan" && small(c, s, false)) action();
  if (name == "dump" && out.empty() && small(c, s, true)) action();
}

void run(const std::vector<std::string>& args) {
  const std::vector<CommandSpec> specs = commands();
  CLI::App app{"rnn-jit (fuzzed)", "rnn-jit"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, CommandAction>> actions;
  for (const CommandSpec& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
    sub->allow_extras();
    actions.emplace_back(sub, spec.setup(*sub));
  }
  // main(): the words before the subcommand.
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") continue;
    if (arg.starts_with("-")) return;  // "unknown flag before the subcommand", exit 2
    bool known = false;
    for (const CommandSpec& spec : specs) known = known || arg == spec.name;
    if (!known) return;  // "unknown subcommand", exit 2
    break;
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    if (!sub->remaining().empty()) return;  // "unknown flag" / "unexpected argument", exit 2
    build_from_flags(*sub, action);
    return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The subcommands that run print plans and kernels: keep libFuzzer's output readable.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    std::vector<std::string> args = rnnjit::fuzz::split_cli_input(data, size);
    args.insert(args.begin(), "rnn-jit");
    run(args);
  } catch (const CLI::ParseError&) {
  } catch (const UsageError&) {
  } catch (const Error&) {
  }
  return 0;
}
