// rnn-jit device: what the CUDA path finds on this machine: the build, NVRTC and the
// architectures it emits, the driver and device 0, cuBLAS, cuDNN and the kernel cache's
// directory. Exit status 0 when a CUDA device is usable, 1 (with the reason) otherwise, so
// scripts (tools/gpu-check.sh) can ask "is there a GPU?".
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "codegen/cuda/nvrtc.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "runtime/cuda/kernel_cache.hpp"
#include "tools/rnn-jit/cli_common.hpp"

namespace rnnjit::cli {
namespace {

int device(bool json) {
  const std::string reason = cuda::device_unavailable_reason();
  const auto dir = cuda::cache_dir();
  bool cublas_ok = false, cudnn_ok = false;
  const std::string cublas = cuda::cublas_status(&cublas_ok), cudnn = cuda::cudnn_status(&cudnn_ok);
  if (json) {
    nlohmann::json j{{"built_with_cuda", cuda::built_with_cuda()}, {"nvrtc", cuda::nvrtc_version()},
                     {"nvrtc_archs", cuda::supported_archs()}, {"device", nullptr}, {"reason", reason},
                     {"cublas", cublas}, {"cublas_ok", cublas_ok}, {"cudnn", cudnn}, {"cudnn_ok", cudnn_ok},
                     {"cache_dir", dir ? nlohmann::json(dir->string()) : nlohmann::json(nullptr)}};
    if (reason.empty()) {
      const cuda::DeviceInfo d = cuda::device_info();
      j["device"] = {{"name", d.name}, {"arch", d.arch}, {"target", d.target}, {"memory", d.memory},
                     {"driver_version", d.driver_version}, {"driver_library", d.driver_library}};
    }
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("built with CUDA: {}\nNVRTC: {} (SASS for sm_{})\n", cuda::built_with_cuda() ? "yes" : "no",
               cuda::nvrtc_version(), fmt::join(cuda::supported_archs(), ", sm_"));
    if (reason.empty()) {
      const cuda::DeviceInfo d = cuda::device_info();
      fmt::print("device 0: {}, sm_{}, {:.1f} GiB; kernels built as {}\ndriver: {} ({})\n", d.name, d.arch,
                 static_cast<double>(d.memory) / (1 << 30), d.target, d.driver_version, d.driver_library);
    }
    fmt::print("cuBLAS: {}\ncuDNN: {}\nkernel cache: {}\n", cublas, cudnn,
               dir ? dir->string() : std::string("disabled (RNNJIT_CACHE_DIR is empty)"));
  }
  if (!reason.empty()) throw Error(reason);
  return kExitOk;
}

CommandAction setup_device(CLI::App& sub) {
  auto json = std::make_shared<bool>(false);
  sub.add_flag("--json", *json, "print one JSON object");
  return [json] { return device(*json); };
}

}  // namespace

RNNJIT_CLI_COMMAND(device, "report the CUDA device, driver, NVRTC, cuBLAS and cuDNN (exit 1 without a device)",
                   setup_device);

}  // namespace rnnjit::cli
