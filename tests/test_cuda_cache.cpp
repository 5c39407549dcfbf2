// The on-disk cache of compiled CUDA kernels without a GPU: the key (source, target, NVRTC
// version, generator version), atomic stores, damaged entries, list and clear (only the
// cache's own files), the memory/disk/compile path of cached_image, and `rnn-jit cache`
// warm/list/--json/clear under RNNJIT_CACHE_DIR.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/gpu_plan.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/persistent_source.hpp"
#include "codegen/cuda/util_source.hpp"
#include "runtime/cuda/kernel_cache.hpp"
#include "tests/scoped_env.hpp"
#include "tests/cli_fixture.hpp"

namespace rnnjit {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;
using cuda::CacheKey;
using cuda::Target;

const Target kSm90{90, true};

TEST(CudaCacheKey, ChangesWithEveryPartAndOnlyThen) {
  const CacheKey k = cuda::cache_key("source", "k", kSm90, "13.0", 3);
  EXPECT_EQ(k.hash, cuda::cache_key("source", "k", kSm90, "13.0", 3).hash);
  EXPECT_NE(k.hash, cuda::cache_key("source ", "k", kSm90, "13.0", 3).hash);
  EXPECT_NE(k.hash, cuda::cache_key("source", "k", {89, true}, "13.0", 3).hash);
  EXPECT_NE(k.hash, cuda::cache_key("source", "k", {90, false}, "13.0", 3).hash);
  EXPECT_NE(k.hash, cuda::cache_key("source", "k", kSm90, "13.1", 3).hash);
  EXPECT_NE(k.hash, cuda::cache_key("source", "k", kSm90, "13.0", 4).hash);
  // Fields are length-prefixed: moving a character between two of them changes the key.
  EXPECT_NE(cuda::cache_key("ab", "k", kSm90, "c", 3).hash, cuda::cache_key("a", "k", kSm90, "bc", 3).hash);
  EXPECT_EQ(k.file_name(), fmt::format("k.sm_90.{:016x}.cubin", k.hash));
  EXPECT_EQ(cuda::cache_key("s", "k", {86, false}).file_name().substr(0, 13), "k.compute_86.");
  EXPECT_TRUE(cuda::cache_key("s", "k", {86, false}).file_name().ends_with(".ptx"));
}

class CudaDiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rnnjit_cuda_cache_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CudaDiskCache, StoresAtomicallyAndLoadsOnlyWholeEntries) {
  const CacheKey key = cuda::cache_key("src", "lstm_fwd_x", kSm90);
  EXPECT_FALSE(cuda::disk_load(dir_, key, "lstm_fwd_x"));
  cuda::disk_store(dir_, key, "\x7f" "ELF ... lstm_fwd_x ...");  // creates the directory
  EXPECT_EQ(cuda::disk_load(dir_, key, "lstm_fwd_x").value_or(""), "\x7f" "ELF ... lstm_fwd_x ...");
  // Only the entry is left: the temporary file was renamed into place.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{key.file_name()});
  // A file without the kernel's symbol (damaged, or another kernel's) is no entry.
  EXPECT_FALSE(cuda::disk_load(dir_, key, "gru_fwd_x"));
  std::ofstream(dir_ / key.file_name(), std::ios::trunc) << "";
  EXPECT_FALSE(cuda::disk_load(dir_, key, "lstm_fwd_x"));
}

TEST_F(CudaDiskCache, ConcurrentStoresOfOneKeyLeaveOneWholeFile) {
  const CacheKey key = cuda::cache_key("src", "k", kSm90);
  const std::string big(1 << 20, 'k');
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] {
    for (int j = 0; j < 5; ++j) cuda::disk_store(dir_, key, big);
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(cuda::disk_load(dir_, key, "k").value_or("").size(), big.size());
  EXPECT_EQ(cuda::disk_list(dir_).size(), 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(CudaDiskCache, ListAndClearTouchOnlyTheCachesFiles) {
  const CacheKey a = cuda::cache_key("a", "lstm_fwd_cuda_h8_c8_n2_ld8_u1", kSm90);
  const CacheKey b = cuda::cache_key("b", cuda::kUtilModule, {80, false});
  cuda::disk_store(dir_, a, "aaaa");
  cuda::disk_store(dir_, b, "bb");
  std::ofstream(dir_ / "notes.txt") << "mine";
  std::ofstream(dir_ / "x.sm_90.0123.cubin") << "a short key: not an entry";
  std::ofstream(dir_ / (a.file_name() + ".tmp.123.0")) << "left by an interrupted store";
  const std::vector<cuda::DiskEntry> entries = cuda::disk_list(dir_);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].module, "lstm_fwd_cuda_h8_c8_n2_ld8_u1");
  EXPECT_EQ(entries[0].target, "sm_90");
  EXPECT_TRUE(entries[0].cubin);
  EXPECT_EQ(entries[0].bytes, 4u);
  EXPECT_EQ(entries[0].key, fmt::format("{:016x}", a.hash));
  EXPECT_EQ(entries[1].module, cuda::kUtilModule);
  EXPECT_EQ(entries[1].target, "compute_80");
  EXPECT_FALSE(entries[1].cubin);
  EXPECT_EQ(cuda::disk_clear(dir_), 3u);  // two entries and the temporary file
  EXPECT_TRUE(cuda::disk_list(dir_).empty());
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "x.sm_90.0123.cubin"));
  EXPECT_TRUE(cuda::disk_list(dir_ / "absent").empty());
  EXPECT_EQ(cuda::disk_clear(dir_ / "absent"), 0u);
}

TEST_F(CudaDiskCache, CachedImageCompilesOnceThenReadsMemoryThenDisk) {
  if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  const ScopedEnv env("RNNJIT_CACHE_DIR", dir_.string());
  // A source no other test compiles: this process's memory cache has not seen it.
  const std::string source = cuda::util_kernels_source() + fmt::format("// {}\n", dir_.string());
  const cuda::CachedImage first = cuda::cached_image(source, cuda::kUtilModule, cuda::kCopyKernel, kSm90);
  EXPECT_EQ(first.source, cuda::ImageSource::compiled);
  EXPECT_TRUE(fs::exists(dir_ / first.key.file_name()));
  const cuda::CachedImage second = cuda::cached_image(source, cuda::kUtilModule, cuda::kCopyKernel, kSm90);
  EXPECT_EQ(second.source, cuda::ImageSource::memory);
  EXPECT_EQ(second.image, first.image);
  cuda::forget_image(first.key);  // what a failed load does: gone from memory and disk
  EXPECT_FALSE(fs::exists(dir_ / first.key.file_name()));
  EXPECT_EQ(cuda::cached_image(source, cuda::kUtilModule, cuda::kCopyKernel, kSm90).source, cuda::ImageSource::compiled);
  cuda::forget_image(first.key);
  cuda::disk_store(dir_, first.key, first.image->bytes);  // as another process would have left it
  const cuda::CachedImage from_disk = cuda::cached_image(source, cuda::kUtilModule, cuda::kCopyKernel, kSm90);
  EXPECT_EQ(from_disk.source, cuda::ImageSource::disk);
  EXPECT_EQ(from_disk.image->bytes, first.image->bytes);
}

// RNNJIT_DUMP: a module the library compiles leaves its source, PTX, image and NVRTC log.
TEST_F(CudaDiskCache, DumpWritesSourcePtxImageAndLog) {
  if (!cuda::nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)";
  const fs::path dump = dir_ / "dump";
  const ScopedEnv env("RNNJIT_DUMP", dump.string());
  const std::string source = cuda::util_kernels_source() + fmt::format("// dump {}\n", dir_.string());
  const cuda::CachedImage image = cuda::cached_image(source, cuda::kUtilModule, cuda::kCopyKernel, kSm90);
  ASSERT_EQ(image.source, cuda::ImageSource::compiled);
  const std::string base = (dump / fmt::format("{}.{}", cuda::kUtilModule, kSm90.name())).string();
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path << " was not written";
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(base + ".cu"), source);
  EXPECT_NE(read(base + ".ptx").find(cuda::kCopyKernel), std::string::npos) << "the PTX names the kernel";
  if (kSm90.cubin) {
    EXPECT_EQ(read(base + ".cubin"), image.image->bytes);
  }
  read(base + ".log");  // NVRTC's log: exists, usually empty
}

TEST(CudaCacheDir, FromTheEnvironment) {
  {
    const ScopedEnv env("RNNJIT_CACHE_DIR", "/some/where");
    EXPECT_EQ(cuda::cache_dir().value_or(""), fs::path("/some/where"));
  }
  {
    const ScopedEnv env("RNNJIT_CACHE_DIR", "");
    EXPECT_FALSE(cuda::cache_dir().has_value());
  }
  const ScopedEnv unset("RNNJIT_CACHE_DIR", "");
  ::unsetenv("RNNJIT_CACHE_DIR");  // restored (or removed again) at the end of the scope
  const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(cuda::cache_dir().value_or(""), fs::path("/xdg/rnnjit"));
}

// `rnn-jit cache`: warm compiles a configuration's GPU kernels into RNNJIT_CACHE_DIR.
class CudaCacheCli : public test::CliFixture {
 protected:
  std::string env() const { return "RNNJIT_CACHE_DIR=" + test::shell_quote(path("cache")); }
  const std::vector<std::string> kSmall = {"--cell", "gru", "--input-size", "6", "--hidden-size", "10", "--seq", "3",
                                           "--batch", "2", "--mode", "train", "--bidirectional"};
};

TEST_F(CudaCacheCli, WarmListJsonClear) {
  std::vector<std::string> warm{"cache", "warm", "--arch", "sm_90"};
  warm.insert(warm.end(), kSmall.begin(), kSmall.end());
  test::CliResult r = cli(warm, env());
  if (!cuda::nvrtc_available()) {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("built without NVRTC"), std::string::npos) << r.err;
    GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC): warm fails as it should";
  }
  ASSERT_EQ(r.status, 0) << r.err;
  // The plan's two gate kernels (forward training, backward), the forward's persistent kernel
  // (shaped for the default GPU: 132 SMs, 232448 bytes a block) and the data-movement module.
  const Plan plan = cuda::make_gpu_plan(
      {.cell = CellKind::gru, .input_size = 6, .hidden_size = 10, .bidirectional = true}, {3, 2}, Mode::training);
  const std::vector<cuda::PersistentKernel> persistent = cuda::persistent_kernels(plan, 132, 232448);
  ASSERT_EQ(persistent.size(), 1u);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
  EXPECT_EQ(r.out.find("compiled"), 0u) << r.out;
  r = cli(warm, env());  // a new process: everything comes from disk
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("disk"), std::string::npos) << r.out;

  r = cli({"cache", "list", "--json"}, env());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dir"], path("cache"));
  ASSERT_EQ(j["entries"].size(), 4u) << r.out;
  std::set<std::string> modules;
  for (const auto& e : j["entries"]) {
    modules.insert(e["module"].get<std::string>());
    EXPECT_EQ(e["target"], "sm_90");
    EXPECT_EQ(e["kind"], "cubin");
    EXPECT_GT(e["bytes"].get<std::uint64_t>(), 0u);
  }
  EXPECT_EQ(modules, (std::set<std::string>{"gru_fwd_train_cuda_h10_c10_n2_ld20_u1", "gru_bwd_cuda_h10_c10_n2_ld20_u1",
                                            persistent[0].name, cuda::kUtilModule}));
  r = cli({"cache", "list"}, env());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("4 entries"), std::string::npos) << r.out;
  // A GPU whose blocks get too little shared memory for W_hh's rows: no persistent kernel.
  std::vector<std::string> small_gpu = warm;
  small_gpu.insert(small_gpu.end(), {"--sms", "4", "--shared-per-block", "256"});
  r = cli(small_gpu, env());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("_persistent_"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;

  std::vector<std::string> ptx = warm;
  ptx[3] = "compute_80";
  ASSERT_EQ(cli(ptx, env()).status, 0);
  EXPECT_EQ(cli({"cache", "list", "--json"}, env()).out.find("\"kind\":\"ptx\"") != std::string::npos, true);

  r = cli({"cache", "clear"}, env());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("removed 8 files"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(cli({"cache", "list", "--json"}, env()).out)["entries"].size(), 0u);
}

TEST_F(CudaCacheCli, Errors) {
  expect_error({"cache", "purge"}, 2, {"unknown cache action 'purge'"});
  expect_error({"cache", "clear", "--json"}, 2, {"--json applies to 'rnn-jit cache list' only"});
  expect_error({"cache", "warm", "--arch", "volta"}, 2, {"--arch", "volta"});
  expect_error({"cache", "warm", "--sms", "0"}, 2, {"--sms"});
  expect_error({"cache", "warm", "--shared-per-block", "-1"}, 2, {"--shared-per-block"});
  const test::CliResult r = cli({"cache", "clear"}, "RNNJIT_CACHE_DIR=");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("disabled"), std::string::npos) << r.err;
  const test::CliResult l = cli({"cache", "list", "--json"}, "RNNJIT_CACHE_DIR=");
  EXPECT_EQ(l.status, 0);
  EXPECT_EQ(nlohmann::json::parse(l.out)["enabled"], false);
}

}  // namespace
}  // namespace rnnjit
