// rnn-jit: the command-line tool. Subcommands live in cmd_<name>.cpp and register themselves
// (see cli_common.hpp); this file parses, dispatches, and maps failures to exit statuses:
//   0 success (including --help), 1 runtime failure, 2 usage error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/rnn-jit/cli_common.hpp"

namespace {

// One line on stderr: "rnn-jit: error: <message>".
void print_error(std::string_view message) {
  std::string line(message);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  while (!line.empty() && line.back() == ' ') line.pop_back();
  fmt::print(stderr, "rnn-jit: error: {}\n", line);
}

std::string command_list(const std::vector<rnnjit::cli::CommandSpec>& specs) {
  std::string out;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (i > 0) out += i + 1 == specs.size() ? " or " : ", ";
    out += specs[i].name;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rnnjit::cli;
  const std::vector<CommandSpec> specs = commands();

  CLI::App app{"rnn-jit: JIT-generated fused RNN operators (vanilla RNN relu/tanh, LSTM, GRU)", "rnn-jit"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, CommandAction>> actions;
  for (const CommandSpec& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
    sub->allow_extras();  // reported below, one by one, with the subcommand's name
    actions.emplace_back(sub, spec.setup(*sub));
  }

  // The top level takes only --help; the first other word must name a subcommand.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") continue;
    if (arg.starts_with("-")) {
      print_error(fmt::format("unknown flag '{}' before the subcommand (see rnn-jit --help)", arg));
      return kExitUsage;
    }
    bool known = false;
    for (const CommandSpec& spec : specs) known = known || arg == spec.name;
    if (!known) {
      print_error(fmt::format("unknown subcommand '{}' (expected {}; see rnn-jit --help)", arg, command_list(specs)));
      return kExitUsage;
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // help on stdout, status 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    if (app.get_subcommands().empty()) {
      print_error(fmt::format("a subcommand is required ({}; see rnn-jit --help)", command_list(specs)));
    } else {
      print_error(e.what());
    }
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return kExitUsage;
  }

  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    const std::vector<std::string> extras = sub->remaining();
    if (!extras.empty()) {
      const std::string& first = extras.front();
      print_error(first.starts_with("-")
                      ? fmt::format("unknown flag '{}' for 'rnn-jit {}' (see rnn-jit {} --help)", first,
                                    sub->get_name(), sub->get_name())
                      : fmt::format("unexpected argument '{}' for 'rnn-jit {}' (see rnn-jit {} --help)", first,
                                    sub->get_name(), sub->get_name()));
      return kExitUsage;
    }
    try {
      return action();
    } catch (const UsageError& e) {
      print_error(e.what());
      return kExitUsage;
    } catch (const CLI::ParseError& e) {
      print_error(e.what());
      return kExitUsage;
    } catch (const std::exception& e) {
      print_error(e.what());
      return kExitFailure;
    }
  }
  print_error("no subcommand given (see rnn-jit --help)");
  return kExitUsage;
}
