// rnn-jit dump: the generated code of a plan's kernels, compiled through the process-wide cache
// exactly as `rnn-jit run`/`demo` would compile them.
//
//   --format asm   Zydis disassembly (Intel syntax, offsets, the kernel's name as header)
//   --format hex   the code bytes, 16 per line, each line starting with its offset
//   --format bin   the raw bytes (to a file with -o, or to stdout when it is not a terminal)
//
// Without -o everything goes to stdout, each kernel under a line "== <name> ==" (raw bytes are
// written bare, so --format bin to stdout takes a single kernel); with -o DIR, one file per
// kernel, <name>.asm / <name>.hex / <name>.bin. Kernels without generated code (the scalar
// twins that an ISA without an emitter runs) are dumped as a line saying so.
//
// --target cuda writes the CUDA source of the plan's gate kernels and of the persistent
// recurrent kernels a device of --sms SMs and --shared-per-block bytes would get (default: an
// H100/H200 SXM's 132 and 232448) (--format cu), or NVRTC's PTX for --arch (default sm_90; no
// GPU needed): see dump_cuda().
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/persistent_source.hpp"
#include "codegen/plan.hpp"
#include "codegen/planner.hpp"
#include "runtime/cache.hpp"
#include "runtime/cpu_caches.hpp"
#include "runtime/kernel.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

namespace fs = std::filesystem;

enum class Format { assembly, hex, bin, cu, ptx };

struct DumpFlags {
  ConfigFlags config = ds2_config_flags();
  ShapeFlags shape = ds2_shape_flags();
  std::string target;  // empty: the detected ISA
  std::string kernel = "all";
  std::string format = "asm";
  std::string out;
  std::string arch = "sm_90";
  GpuShapeFlags gpu;
  int threads = 0;  // 0: the runtime's default
  std::string fpmath = "strict";
  std::string bf16_unit = "amx";
  std::string quantize = "none";
  std::string int8_unit;  // empty: avx512_vnni for --target avx512, avx2 for --target avx2
};

Format parse_format(const std::string& name, bool cuda) {
  if (name == "asm") return Format::assembly;
  if (name == "hex") return Format::hex;
  if (name == "bin") return Format::bin;
  if (name == "cu" || name == "ptx") {
    if (!cuda) throw UsageError(fmt::format("--format {} is only valid with --target cuda (expected asm, hex or bin)", name));
    return name == "cu" ? Format::cu : Format::ptx;
  }
  throw UsageError(fmt::format("--format: unknown format '{}' (expected asm, hex or bin; cu or ptx for --target cuda)",
                               name));
}

const char* extension(Format f) {
  switch (f) {
    case Format::assembly: return "asm";
    case Format::hex: return "hex";
    case Format::bin: return "bin";
    case Format::cu: return "cu";
    case Format::ptx: return "ptx";
  }
  return "out";
}

void write_file(const fs::path& path, const void* data, std::size_t size);

// The CUDA target: plan for the device, generate CUDA source (cu) or compile it with NVRTC (ptx).
int dump_cuda(const RnnConfig& config, const Shape& shape, Mode mode, Format format, const DumpFlags& f) {
  if (format != Format::cu && format != Format::ptx)
    throw UsageError("--format: the CUDA target writes cu or ptx");
  if (f.arch.rfind("sm_", 0) != 0 || f.arch.size() < 5)
    throw UsageError(fmt::format("--arch: expected sm_XY (e.g. sm_90), got '{}'", f.arch));
  // The device plan's elementwise kernels; its GEMMs are cuBLAS calls, not generated code.
  const Plan plan = make_plan(config, shape, mode, Isa::cuda);
  // The gate kernels, then the persistent kernels of the forward ones (name, source).
  std::vector<std::pair<std::string, std::string>> kernels;
  for (const KernelDesc& d : plan.kernels) kernels.emplace_back(kernel_name(d), cuda::gate_kernel_source(d));
  for (const cuda::PersistentKernel& k :
       cuda::persistent_kernels(plan, f.gpu.sms, static_cast<std::size_t>(f.gpu.shared_per_block)))
    kernels.emplace_back(k.name, k.source);
  std::vector<std::pair<std::string, std::string>> selected;
  std::vector<std::string> names;
  for (const auto& kernel : kernels) {
    names.push_back(kernel.first);
    if (f.kernel == "all" || f.kernel == kernel.first) selected.push_back(kernel);
  }
  if (selected.empty())
    throw UsageError(fmt::format("--kernel: no kernel '{}' in this plan (available: {}, or all)", f.kernel,
                                 fmt::join(names, ", ")));
  if (!f.out.empty()) {
    std::error_code ec;
    fs::create_directories(f.out, ec);
    if (ec || !fs::is_directory(f.out)) throw Error(fmt::format("{}: cannot create output directory", f.out));
  }
  for (const auto& [name, source] : selected) {
    const std::string text = format == Format::cu ? source : cuda::compile(source, name, f.arch).ptx;
    if (f.out.empty()) {
      fmt::print("== {} ==\n{}\n", name, text);
    } else {
      const fs::path path = fs::path(f.out) / (name + "." + extension(format));
      write_file(path, text.data(), text.size());
      fmt::print("{}\n", path.string());
    }
  }
  return kExitOk;
}

std::string no_code_message(const CompiledKernel& k) {
  return fmt::format("{}: no generated code: the scalar reference twin (kernels/) runs instead (isa {})", k.name(),
                     to_string(k.desc().isa_kind()));
}

std::string hex_text(const CompiledKernel& k) {
  const std::span<const std::uint8_t> code = k.code();
  if (code.empty()) return "# " + no_code_message(k) + "\n";
  std::string out = fmt::format("# {}: {} bytes: {} of instructions, then {} of constant data\n", k.name(), code.size(),
                                k.text_size(), code.size() - k.text_size());
  for (std::size_t line = 0; line < code.size(); line += 16) {
    out += fmt::format("{:08x}:", line);
    for (std::size_t i = line; i < code.size() && i < line + 16; ++i) out += fmt::format(" {:02x}", code[i]);
    out += '\n';
  }
  return out;
}

std::string text_of(const CompiledKernel& k, Format f) {
  return f == Format::assembly ? k.disassembly() : hex_text(k);
}

void write_file(const fs::path& path, const void* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (out) out.close();
  if (!out) throw Error(fmt::format("{}: cannot write", path.string()));
}

int dump(const DumpFlags& f) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  validate_flags(config, shape);
  const bool cuda = f.target == "cuda";
  const Format format = parse_format(f.format, cuda);
  const Isa isa = cuda ? Isa::reference : build_isa(f.target, "--target");
  if (format == Format::bin && f.out.empty() && stdout_is_terminal())
    throw UsageError("--format bin writes raw bytes: give -o DIR or redirect stdout to a file or pipe");
  if (cuda) return dump_cuda(config, shape, mode, format, f);

  // Code is generated, never run: the bf16 kernels of --fpmath bf16 and the int8 ones of
  // --quantize int8 dump on any CPU.
  const Plan plan = make_plan(config, shape, mode, isa, build_threads(f.threads), {}, detect_caches(),
                              build_fpmath(f.fpmath), build_bf16_unit(f.bf16_unit), build_quantize(f.quantize),
                              build_int8_unit(f.int8_unit.empty() ? (isa == Isa::avx2 ? "avx2" : "avx512_vnni")
                                                                  : f.int8_unit));
  std::vector<KernelDesc> selected;
  std::vector<std::string> names;  // every kernel of the plan, once
  for (const KernelDesc& d : plan.kernels) {
    const std::string name = kernel_name(d);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    names.push_back(name);
    if (f.kernel == "all" || f.kernel == name) selected.push_back(d);
  }
  const std::string available = fmt::format("{}", fmt::join(names, ", "));
  if (selected.empty())
    throw UsageError(fmt::format("--kernel: no kernel '{}' in this plan (available: {}, or all)", f.kernel, available));
  if (format == Format::bin && f.out.empty() && selected.size() > 1)
    throw UsageError(fmt::format("--format bin to stdout writes one kernel's bytes: give --kernel NAME ({}) or -o DIR",
                                 available));

  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  for (const KernelDesc& d : selected) kernels.push_back(Cache::instance().kernel(d));

  std::size_t twins = 0;
  for (const auto& k : kernels) twins += k->code().empty() ? 1 : 0;
  std::vector<std::string> notes = plan.notes;
  if (twins > 0)
    notes.push_back(fmt::format("target {}: kernels without generated code (scalar reference twins): {} of {}",
                                to_string(isa), twins, kernels.size()));

  const std::string ext = extension(format);
  if (f.out.empty()) {
    if (format == Format::bin) {
      const std::span<const std::uint8_t> code = kernels.front()->code();
      if (code.empty()) {
        fmt::print(stderr, "rnn-jit: {}\n", no_code_message(*kernels.front()));  // nothing on stdout
      } else if (std::fwrite(code.data(), 1, code.size(), stdout) != code.size() || std::fflush(stdout) != 0) {
        throw Error("cannot write to stdout");
      }
      return kExitOk;
    }
    for (const std::string& note : notes) fmt::print("note: {}\n", note);
    for (const auto& k : kernels) fmt::print("== {} ==\n{}", k->name(), text_of(*k, format));
    return kExitOk;
  }

  std::error_code ec;
  fs::create_directories(f.out, ec);
  if (ec || !fs::is_directory(f.out))
    throw Error(fmt::format("{}: cannot create output directory: {}", f.out,
                            ec ? ec.message() : std::string("not a directory")));
  for (const std::string& note : notes) fmt::print("note: {}\n", note);
  int files = 0;
  for (const auto& k : kernels) {
    const fs::path path = fs::path(f.out) / (k->name() + "." + ext);
    if (format == Format::bin) {
      const std::span<const std::uint8_t> code = k->code();
      if (code.empty()) {
        fmt::print("{}: no generated code (scalar reference twin): no {} written\n", k->name(), path.string());
        continue;
      }
      write_file(path, code.data(), code.size());
      fmt::print("wrote {} ({} bytes)\n", path.string(), code.size());
    } else {
      const std::string text = text_of(*k, format);
      write_file(path, text.data(), text.size());
      fmt::print("wrote {}{}\n", path.string(), k->code().empty() ? " (scalar reference twin: no generated code)" : "");
    }
    ++files;
  }
  fmt::print("rnn-jit dump: {} kernel{} of {}, {}, {}, target {}: wrote {} file{} to {}\n", kernels.size(),
             kernels.size() == 1 ? "" : "s", describe(config), describe(shape), to_string(mode), to_string(isa), files,
             files == 1 ? "" : "s", f.out);
  return kExitOk;
}

CommandAction setup_dump(CLI::App& sub) {
  auto f = std::make_shared<DumpFlags>();
  add_config_flags(sub, f->config, /*required=*/false);
  add_shape_flags(sub, f->shape, /*required=*/false);
  sub.add_option("--target", f->target,
                 "avx512, avx2, reference or cuda (default: the CPU's best ISA, or RNNJIT_ISA when set)");
  sub.add_option("--kernel", f->kernel, "a kernel's name (see rnn-jit plan), or all")->capture_default_str();
  add_threads_flag(sub, f->threads);
  add_fpmath_flag(sub, f->fpmath);
  sub.add_option("--bf16-unit", f->bf16_unit, "with --fpmath bf16: the kernels of amx or avx512_bf16")
      ->capture_default_str();
  add_quantize_flag(sub, f->quantize);
  sub.add_option("--int8-unit", f->int8_unit, "with --quantize int8: the kernels of amx, avx512_vnni, avx_vnni or avx2 "
                 "(default: avx512_vnni for --target avx512, avx2 for --target avx2)")
      ->capture_default_str();
  sub.add_option("--format", f->format, "asm (disassembly), hex or bin (raw bytes); cu or ptx for --target cuda")
      ->capture_default_str();
  sub.add_option("-o,--output-dir", f->out, "write one file per kernel, <name>.<format>, into this directory");
  sub.add_option("--arch", f->arch, "--target cuda --format ptx: the GPU architecture NVRTC compiles for (default sm_90)");
  add_gpu_shape_flags(sub, f->gpu);
  sub.footer(
      "Defaults: the DeepSpeech2 LSTM (lstm, I=H=800, 1 layer, T=300, N=20, infer). Without -o, everything goes to "
      "stdout, each kernel under a line '== <name> =='; --format bin to stdout writes one kernel's bytes, and only "
      "when stdout is not a terminal.");
  return [f] { return dump(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(dump, "write the generated code of a plan's kernels (disassembly, hex or raw bytes)", setup_dump);

}  // namespace rnnjit::cli
