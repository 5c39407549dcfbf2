#include "runtime/cuda/driver.hpp"

#include <cstdlib>
#include <memory>
#include <variant>

#include <fmt/format.h>

#include "rnnjit/error.hpp"
#include "runtime/cuda/dynlib.hpp"

namespace rnnjit::cuda {
namespace {

#define RNNJIT_STRINGIFY2(x) #x
#define RNNJIT_STRINGIFY(x) RNNJIT_STRINGIFY2(x)

std::string describe_with(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  return fmt::format("{} ({})", name ? name : fmt::format("CUresult {}", static_cast<int>(r)),
                     text ? text : "no description");
}

// Loads and initialises the driver, or says why not (prefixed "no CUDA device: ").
std::variant<DriverApi, std::string> load() {
  const char* forced = std::getenv("RNNJIT_CUDA_DRIVER_LIBRARY");
  const std::string wanted = forced && *forced ? forced : kDriverLibrary;
  // Kept for the process's lifetime: the driver is never unloaded.
  static auto* library = new DynamicLibrary({wanted});
  if (!library->loaded())
    return fmt::format("no CUDA device: {} not found (is the NVIDIA driver installed? {})", wanted, library->error());
  DriverApi api;
  api.path = wanted;
#define RNNJIT_RESOLVE_ENTRY(name)                                                                            \
  api.name = reinterpret_cast<decltype(api.name)>(library->symbol(RNNJIT_STRINGIFY(name)));                  \
  if (!api.name)                                                                                              \
    return fmt::format("no CUDA device: {} has no {} (a driver older than CUDA {}.{}?)", wanted,              \
                       RNNJIT_STRINGIFY(name), CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  RNNJIT_CUDA_DRIVER_FUNCTIONS(RNNJIT_RESOLVE_ENTRY)
#undef RNNJIT_RESOLVE_ENTRY
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS)
    return fmt::format("no CUDA device: cuInit failed: {}", describe_with(api, r));
  if (CUresult r = api.cuDriverGetVersion(&api.version); r != CUDA_SUCCESS)
    return fmt::format("no CUDA device: cuDriverGetVersion failed: {}", describe_with(api, r));
  if (CUresult r = api.cuDeviceGetCount(&api.device_count); r != CUDA_SUCCESS)
    return fmt::format("no CUDA device: cuDeviceGetCount failed: {}", describe_with(api, r));
  if (api.device_count < 1) return std::string("no CUDA device: the driver reports no devices");
  return api;
}

const std::variant<DriverApi, std::string>& loaded() {
  static const std::variant<DriverApi, std::string> result = load();
  return result;
}

}  // namespace

const DriverApi& driver() {
  const auto& r = loaded();
  if (const auto* why = std::get_if<std::string>(&r)) throw Error(*why);
  return std::get<DriverApi>(r);
}

std::string driver_error() {
  const auto& r = loaded();
  const auto* why = std::get_if<std::string>(&r);
  return why ? *why : std::string();
}

std::string describe(CUresult r) {
  const auto& l = loaded();
  const auto* api = std::get_if<DriverApi>(&l);
  return api ? describe_with(*api, r) : fmt::format("CUresult {}", static_cast<int>(r));
}

void check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) throw Error(fmt::format("{}: {}", what, describe(r)));
}

}  // namespace rnnjit::cuda
