// ONNX Runtime embedded in a C++ program, with rnnjit running the model's LSTM, GRU and RNN nodes.
//
//   onnxruntime_embed LIBONNXRUNTIME LIBRNNJIT_ONNXRUNTIME MODEL.onnx
//
// LIBONNXRUNTIME is ONNX Runtime's C library (PyPI's wheel ships onnxruntime/capi/libonnxruntime.so.1.x;
// this program opens it with dlopen, so it builds with ONNX Runtime's headers alone),
// LIBRNNJIT_ONNXRUNTIME rnnjit's custom-op library (rnnjit.onnxruntime.library_path()). The model's
// float inputs are filled with a ramp (dynamic dimensions 3); it runs in a session without the
// library and in one with it, and prints the largest difference between their outputs and how
// many nodes rnnjit ran.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

namespace {

std::vector<Ort::Value> run(Ort::Env& env, const char* model, const char* rnnjit_library,
                            std::vector<std::vector<float>>& data) {
  Ort::SessionOptions options;
  options.SetIntraOpNumThreads(2);
  if (rnnjit_library) options.RegisterCustomOpsLibrary(rnnjit_library);
  Ort::Session session(env, model, options);
  Ort::AllocatorWithDefaultOptions allocator;
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::AllocatedStringPtr> names;
  std::vector<const char*> in_names, out_names;
  std::vector<Ort::Value> inputs;
  for (std::size_t i = 0; i < session.GetInputCount(); ++i) {
    names.push_back(session.GetInputNameAllocated(i, allocator));
    in_names.push_back(names.back().get());
    std::vector<std::int64_t> dims = session.GetInputTypeInfo(i).GetTensorTypeAndShapeInfo().GetShape();
    std::int64_t count = 1;
    for (std::int64_t& d : dims) count *= (d = d > 0 ? d : 3);
    if (data.size() <= i) {
      data.emplace_back(static_cast<std::size_t>(count));
      for (std::size_t k = 0; k < data[i].size(); ++k) data[i][k] = std::sin(0.1f * static_cast<float>(k));
    }
    inputs.push_back(Ort::Value::CreateTensor<float>(cpu, data[i].data(), data[i].size(), dims.data(), dims.size()));
  }
  for (std::size_t o = 0; o < session.GetOutputCount(); ++o) {
    names.push_back(session.GetOutputNameAllocated(o, allocator));
    out_names.push_back(names.back().get());
  }
  return session.Run(Ort::RunOptions{nullptr}, in_names.data(), inputs.data(), inputs.size(), out_names.data(),
                     out_names.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s LIBONNXRUNTIME LIBRNNJIT_ONNXRUNTIME MODEL.onnx\n", argv[0]);
    return 2;
  }
  void* ort = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  auto get_api_base = ort ? reinterpret_cast<const OrtApiBase* (*)()>(dlsym(ort, "OrtGetApiBase")) : nullptr;
  if (!get_api_base) {
    std::fprintf(stderr, "onnxruntime_embed: cannot load ONNX Runtime from %s: %s\n", argv[1], dlerror());
    return 1;
  }
  const OrtApi* api = get_api_base()->GetApi(ORT_API_VERSION);
  if (!api) {
    std::fprintf(stderr, "onnxruntime_embed: ONNX Runtime %s is older than these headers (API %d)\n",
                 get_api_base()->GetVersionString(), ORT_API_VERSION);
    return 1;
  }
  Ort::InitApi(api);
  try {
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "onnxruntime_embed");
    std::vector<std::vector<float>> data;
    std::vector<Ort::Value> alone = run(env, argv[3], nullptr, data);
    std::vector<Ort::Value> with = run(env, argv[3], argv[2], data);
    double worst = 0;
    for (std::size_t o = 0; o < alone.size(); ++o) {
      const std::size_t n = alone[o].GetTensorTypeAndShapeInfo().GetElementCount();
      const float *a = alone[o].GetTensorData<float>(), *b = with[o].GetTensorData<float>();
      for (std::size_t k = 0; k < n; ++k) worst = std::max(worst, std::fabs(static_cast<double>(a[k]) - b[k]));
    }
    // The library's own counters (the handle ONNX Runtime loaded it with).
    std::uint64_t runs = 0;
    void* lib = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
    if (auto stats = lib ? reinterpret_cast<void (*)(std::uint64_t*, std::uint64_t*, std::uint64_t*, std::uint64_t*,
                                                     std::uint64_t*)>(dlsym(lib, "rnnjit_onnxruntime_stats"))
                         : nullptr)
      stats(nullptr, nullptr, &runs, nullptr, nullptr);
    std::printf("onnxruntime %s: %zu outputs, max |with rnnjit - without| = %.3g, rnnjit runs %llu\n",
                get_api_base()->GetVersionString(), alone.size(), worst, static_cast<unsigned long long>(runs));
  } catch (const Ort::Exception& e) {
    std::fprintf(stderr, "onnxruntime_embed: %s\n", e.what());
    return 1;
  }
  return 0;
}
