// Without a GPU, asking for one says why there is none, in one line that names the reason:
// the driver library missing, cuInit failing, no devices, a driver lacking an entry point. The
// last three use stand-in driver libraries built here (RNNJIT_CUDA_DRIVER_LIBRARY), run in
// child processes because the driver is probed once per process. Also the CLI's device flags
// and their usage errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "rnnjit/rnn.hpp"
#include "runtime/cuda/cuda_support.hpp"
#include "tests/cli_fixture.hpp"

namespace rnnjit {
namespace {

const RnnConfig kLstm{.cell = CellKind::lstm, .input_size = 4, .hidden_size = 8};

TEST(CudaDriver, PrepareWithoutADeviceSaysWhy) {
  const std::string reason = cuda::device_unavailable_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  EXPECT_EQ(reason.rfind("no CUDA device: ", 0), 0u) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  const bool no_driver = !std::ifstream("/proc/driver/nvidia/version");
  if (cuda::built_with_cuda() && !std::getenv("RNNJIT_CUDA_DRIVER_LIBRARY") && no_driver) {
    EXPECT_NE(reason.find("libcuda.so.1"), std::string::npos) << reason;  // a machine without the NVIDIA driver
  }
  if (!cuda::built_with_cuda()) {
    EXPECT_NE(reason.find("built without the CUDA toolkit"), std::string::npos) << reason;
  }
  for (Mode mode : {Mode::inference, Mode::training}) {
    try {
      Rnn(kLstm, {.device = Device::cuda}).prepare({3, 2}, mode);
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), reason);
    }
  }
  EXPECT_THROW(cuda::device_info(), Error);
  EXPECT_THROW(cuda::DeviceArray(16), Error);
}

TEST(CudaDriver, DeviceNamesAndCpuOnlyBackends) {
  EXPECT_EQ(parse_device("cuda"), Device::cuda);
  EXPECT_EQ(parse_device("cpu"), Device::cpu);
  EXPECT_EQ(to_string(Device::cuda), "cuda");
  EXPECT_THROW(parse_device("gpu"), Error);
  try {
    Rnn(kLstm, {.backend = Backend::reference, .device = Device::cuda}).prepare({3, 2}, Mode::inference);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend reference runs on the CPU only"), std::string::npos) << e.what();
  }
}

// Stand-ins for libcuda.so.1: every entry point the loader looks up, failing in one chosen way.
class FakeDriver : public test::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without the CUDA toolkit: the driver is never loaded";
    const char* cc = std::getenv("CC");
    compiler_ = cc && *cc ? cc : "cc";
    if (std::system((compiler_ + " --version >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no C compiler";
  }

  // A driver whose cuInit returns `init` and that reports `devices` devices; without `omit`.
  std::string build(const std::string& name, int init, int devices, const std::string& omit = "") {
    std::string c = fmt::format(
        "int cuGetErrorName(int e, const char** s) {{ *s = e == 100 ? \"CUDA_ERROR_NO_DEVICE\" : \"CUDA_ERROR_UNKNOWN\"; "
        "return 0; }}\n"
        "int cuGetErrorString(int e, const char** s) {{ *s = e == 100 ? \"no CUDA-capable device is detected\" : "
        "\"unknown error\"; return 0; }}\n"
        "int cuInit(unsigned flags) {{ (void)flags; return {}; }}\n"
        "int cuDriverGetVersion(int* v) {{ *v = 13000; return 0; }}\n"
        "int cuDeviceGetCount(int* n) {{ *n = {}; return 0; }}\n",
        init, devices);
    for (const std::string& s : cuda::driver_symbols())
      if (s != omit && s != "cuGetErrorName" && s != "cuGetErrorString" && s != "cuInit" && s != "cuDriverGetVersion" &&
          s != "cuDeviceGetCount")
        c += fmt::format("int {}(void) {{ return 999; }}\n", s);
    std::ofstream(path(name + ".c")) << c;
    const std::string lib = path(name + ".so");
    const std::string cmd = fmt::format("{} -shared -fPIC -o {} {} 2>{}", compiler_, test::shell_quote(lib),
                                        test::shell_quote(path(name + ".c")), test::shell_quote(path(name + ".log")));
    EXPECT_EQ(std::system(cmd.c_str()), 0) << test::slurp(path(name + ".log"));
    return lib;
  }

  void expect_reason(const std::string& library, const std::string& reason) {
    expect_error_env({"device"}, "RNNJIT_CUDA_DRIVER_LIBRARY=" + test::shell_quote(library), 1, reason);
    // The API says the same through Rnn::prepare, here in rnn-jit bench.
    expect_error_env({"bench", "--device", "cuda", "--cell", "gru", "--input-size", "3", "--hidden-size", "4", "--seq",
                      "2", "--batch", "1", "--reps", "1", "--warmup", "0"},
                     "RNNJIT_CUDA_DRIVER_LIBRARY=" + test::shell_quote(library), 1, reason);
  }

  void expect_error_env(const std::vector<std::string>& args, const std::string& env, int status,
                        const std::string& reason) {
    const test::CliResult r = cli(args, env);
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(r.err, "rnn-jit: error: " + reason + "\n");
  }

  std::string compiler_;
};

TEST_F(FakeDriver, CuInitFails) {
  expect_reason(build("noinit", 100, 1),
                "no CUDA device: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
}

TEST_F(FakeDriver, NoDevices) { expect_reason(build("nodevices", 0, 0), "no CUDA device: the driver reports no devices"); }

TEST_F(FakeDriver, MissingEntryPoint) {
  const std::string lib = build("old", 0, 1, "cuLaunchKernel");
  const test::CliResult r = cli({"device"}, "RNNJIT_CUDA_DRIVER_LIBRARY=" + test::shell_quote(lib));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no CUDA device: " + lib + " has no cuLaunchKernel"), std::string::npos) << r.err;
}

TEST_F(FakeDriver, LibraryNotFound) {
  const test::CliResult r = cli({"device"}, "RNNJIT_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("rnn-jit: error: no CUDA device: /nonexistent/libcuda.so.1 not found", 0), 0u) << r.err;
}

class CudaCli : public test::CliFixture {};

TEST_F(CudaCli, BenchDeviceFlags) {
  const std::vector<std::string> small{"bench", "--cell", "lstm", "--input-size", "3", "--hidden-size", "4", "--seq",
                                       "2", "--batch", "1", "--reps", "1", "--warmup", "0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = small;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_error(with({"--device", "gpu"}), 2, {"--device: unknown device 'gpu' (expected cpu or cuda)"});
  expect_error(with({"--device", "cuda", "--backend", "reference"}), 2, {"--backend reference runs on the CPU only"});
  expect_error(with({"--device", "cuda", "--peak"}), 2, {"--peak", "not with --device cuda"});
  for (const std::string peer : {"cudnn", "cudnn_persistent"}) {
    expect_error(with({"--device", "cuda", "--mixed-lengths", "--compare", peer}), 2,
                 {"--compare " + peer + ": the cuDNN peer runs every element for all T steps (no --mixed-lengths)"});
    if (cuda::built_with_cuda())
      expect_error(with({"--compare", peer}), 2, {"--compare " + peer + " needs --device cuda"});
    else
      expect_error(with({"--compare", peer}), 2, {"--compare " + peer + ": rnn-jit was built without the CUDA toolkit"});
  }
  const std::string reason = cuda::device_unavailable_reason();
  if (!reason.empty()) {
    expect_error(with({"--device", "cuda"}), 1, {reason});
    expect_error({"device"}, 1, {reason});
  }
}

}  // namespace
}  // namespace rnnjit
