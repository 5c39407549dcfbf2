// rnn-jit cache: the on-disk cache of compiled CUDA kernels (runtime/cuda/kernel_cache.hpp),
// under RNNJIT_CACHE_DIR (unset: $XDG_CACHE_HOME/rnnjit or ~/.cache/rnnjit).
//
//   rnn-jit cache list [--json]   every entry: module (kernel name), target, key, kind, bytes
//   rnn-jit cache clear           removes the entries (and leftover temporary files), nothing else
//   rnn-jit cache warm [config and shape flags] [--arch sm_90] [--sms 132 --shared-per-block B]
//                                 compiles every kernel of the configuration's GPU plan with NVRTC
//                                 into the cache (no GPU needed), as Device::cuda would, the
//                                 persistent kernels of a GPU with those SMs and shared memory too
#include <fmt/format.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/persistent_source.hpp"
#include "codegen/cuda/util_source.hpp"
#include "runtime/cuda/kernel_cache.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

struct CacheFlags {
  std::string action = "list";
  bool json = false;
  ConfigFlags config = ds2_config_flags();
  ShapeFlags shape = ds2_shape_flags();
  std::string arch = "sm_90";
  GpuShapeFlags gpu;
};

constexpr const char* kDisabled = "the CUDA kernel disk cache is disabled (RNNJIT_CACHE_DIR is set and empty)";

int list(const CacheFlags& f, const std::optional<std::filesystem::path>& dir) {
  const std::vector<cuda::DiskEntry> entries = dir ? cuda::disk_list(*dir) : std::vector<cuda::DiskEntry>{};
  std::uintmax_t total = 0;
  for (const cuda::DiskEntry& e : entries) total += e.bytes;
  if (f.json) {
    nlohmann::json j{{"dir", dir ? nlohmann::json(dir->string()) : nlohmann::json(nullptr)},
                     {"enabled", dir.has_value()}, {"entries", nlohmann::json::array()}, {"total_bytes", total}};
    for (const cuda::DiskEntry& e : entries)
      j["entries"].push_back({{"file", e.file}, {"module", e.module}, {"target", e.target}, {"key", e.key},
                              {"kind", e.cubin ? "cubin" : "ptx"}, {"bytes", e.bytes}});
    fmt::print("{}\n", j.dump());
    return kExitOk;
  }
  if (!dir) {
    fmt::print("{}\n", kDisabled);
    return kExitOk;
  }
  fmt::print("CUDA kernel cache {}: {} entr{}, {} bytes\n", dir->string(), entries.size(),
             entries.size() == 1 ? "y" : "ies", total);
  for (const cuda::DiskEntry& e : entries)
    fmt::print("  {:<8} {:<12} {:>9} bytes  {}\n", e.target, e.cubin ? "cubin" : "ptx", e.bytes, e.module);
  return kExitOk;
}

int clear(const std::optional<std::filesystem::path>& dir) {
  if (!dir) throw Error(kDisabled);
  const std::size_t removed = cuda::disk_clear(*dir);
  fmt::print("removed {} file{} from {}\n", removed, removed == 1 ? "" : "s", dir->string());
  return kExitOk;
}

// Every kernel of the configuration's GPU plan and the data-movement module, for --arch.
int warm(const CacheFlags& f, const std::optional<std::filesystem::path>& dir) {
  const RnnConfig config = build_config(f.config);
  const Shape shape = build_shape(f.shape);
  const Mode mode = build_mode(f.shape);
  validate_flags(config, shape);
  if (!cuda::nvrtc_available())
    throw Error("cache warm: rnnjit was built without NVRTC (CUDA toolkit not found): nothing can be compiled");
  cuda::Target target;
  try {
    target = cuda::parse_target(f.arch);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--arch: {}", e.what()));
  }
  if (!dir) throw Error(kDisabled);
  const Plan plan = cuda::make_gpu_plan(config, shape, mode);
  auto show = [&](const cuda::CachedImage& c) {
    fmt::print("{:<8} {}\n", to_string(c.source), (*dir / c.key.file_name()).string());
  };
  for (const KernelDesc& d : plan.kernels) {
    const std::string name = kernel_name(d);
    show(cuda::cached_image(cuda::gate_kernel_source(d), name, name, target));
  }
  for (const cuda::PersistentKernel& k :
       cuda::persistent_kernels(plan, f.gpu.sms, static_cast<std::size_t>(f.gpu.shared_per_block)))
    show(cuda::cached_image(k.source, k.name, k.name, target));
  show(cuda::cached_image(cuda::util_kernels_source(), cuda::kUtilModule, cuda::kCopyKernel, target));
  return kExitOk;
}

int cache(const CacheFlags& f) {
  if (f.action != "list" && f.action != "clear" && f.action != "warm")
    throw UsageError(fmt::format("unknown cache action '{}' (expected list, clear or warm)", f.action));
  if (f.json && f.action != "list") throw UsageError("--json applies to 'rnn-jit cache list' only");
  const std::optional<std::filesystem::path> dir = cuda::cache_dir();
  if (f.action == "list") return list(f, dir);
  if (f.action == "clear") return clear(dir);
  return warm(f, dir);
}

CommandAction setup_cache(CLI::App& sub) {
  auto f = std::make_shared<CacheFlags>();
  sub.add_option("action", f->action, "list (default), clear or warm");
  sub.add_flag("--json", f->json, "list: print one JSON object");
  add_config_flags(sub, f->config, /*required=*/false);
  add_shape_flags(sub, f->shape, /*required=*/false);
  sub.add_option("--arch", f->arch, "warm: the GPU architecture, sm_XY (cubin, or PTX when NVRTC cannot emit it) or "
                                    "compute_XY (PTX)")
      ->capture_default_str();
  add_gpu_shape_flags(sub, f->gpu);
  sub.footer("The cache lives in RNNJIT_CACHE_DIR (unset: $XDG_CACHE_HOME/rnnjit, else ~/.cache/rnnjit; set and "
             "empty: disabled). warm takes the configuration and shape flags of the other subcommands (default: the "
             "DeepSpeech2 LSTM) and needs no GPU.");
  return [f] { return cache(*f); };
}

}  // namespace

RNNJIT_CLI_COMMAND(cache, "list, clear or warm the on-disk cache of compiled CUDA kernels", setup_cache);

}  // namespace rnnjit::cli
