#include "runtime/cuda/kernel_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/fnv1a.hpp"
#include "codegen/kernel_desc.hpp"
#include "rnnjit/error.hpp"
#include "runtime/log.hpp"

namespace fs = std::filesystem;

namespace rnnjit::cuda {
namespace {

constexpr const char* kTempMarker = ".tmp.";

bool is_target(const std::string& s) {
  for (const char* prefix : {"sm_", "compute_"}) {
    const std::size_t n = std::char_traits<char>::length(prefix);
    if (s.size() > n && s.compare(0, n, prefix) == 0 &&
        std::all_of(s.begin() + static_cast<std::ptrdiff_t>(n), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

// "<module>.<target>.<16 hex>.<cubin|ptx>" -> entry; nullopt for anything else.
std::optional<DiskEntry> parse_entry(const fs::path& path) {
  const std::string file = path.filename().string();
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dot = file.find('.', start);
    parts.push_back(file.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() != 4 || parts[0].empty() || !is_target(parts[1]) || parts[2].size() != 16 ||
      !std::all_of(parts[2].begin(), parts[2].end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }) ||
      (parts[3] != "cubin" && parts[3] != "ptx"))
    return std::nullopt;
  return DiskEntry{file, parts[0], parts[1], parts[2], parts[3] == "cubin", 0};
}

struct MemoryCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Image>> images;  // by file name
};

MemoryCache& memory() {
  static MemoryCache cache;
  return cache;
}

}  // namespace

std::optional<fs::path> cache_dir() {
  if (const char* dir = std::getenv("RNNJIT_CACHE_DIR")) {
    if (!*dir) return std::nullopt;
    return fs::path(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "rnnjit";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "rnnjit";
  return std::nullopt;
}

std::string CacheKey::file_name() const {
  return fmt::format("{}.{}.{:016x}.{}", module, target.name(), hash, target.cubin ? "cubin" : "ptx");
}

CacheKey cache_key(const std::string& source, const std::string& module, const Target& target, const std::string& nvrtc,
                   std::uint32_t generator_version) {
  Fnv1a h;  // over length-prefixed fields
  h.add_field("rnnjit cuda kernel");
  h.add_field(source);
  h.add_field(target.name());
  h.add_field(nvrtc);
  h.add_field(std::to_string(generator_version));
  return {module, target, h.value()};
}

CacheKey cache_key(const std::string& source, const std::string& module, const Target& target) {
  return cache_key(source, module, target, nvrtc_version(), kGeneratorVersion);
}

std::optional<std::string> disk_load(const fs::path& dir, const CacheKey& key, const std::string& symbol) {
  std::ifstream in(dir / key.file_name(), std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || bytes.empty() || bytes.find(symbol) == std::string::npos) return std::nullopt;
  return bytes;
}

void disk_store(const fs::path& dir, const CacheKey& key, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the CUDA kernel cache directory: {}", dir.string(), ec.message()));
  const fs::path final_path = dir / key.file_name();
  // Unique per process and call, in the same directory (rename is atomic within a file system).
  const fs::path temp = dir / fmt::format("{}{}{}.{}", key.file_name(), kTempMarker, ::getpid(), counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      throw Error(fmt::format("{}: cannot write", temp.string()));
    }
  }
  fs::rename(temp, final_path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw Error(fmt::format("{}: cannot rename into place: {}", final_path.string(), ec.message()));
  }
}

void disk_remove(const fs::path& dir, const CacheKey& key) {
  std::error_code ec;
  fs::remove(dir / key.file_name(), ec);
}

std::vector<DiskEntry> disk_list(const fs::path& dir) {
  std::vector<DiskEntry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::optional<DiskEntry> e = parse_entry(it->path());
    if (!e) continue;
    e->bytes = it->file_size(ec);
    entries.push_back(std::move(*e));
  }
  std::sort(entries.begin(), entries.end(), [](const DiskEntry& a, const DiskEntry& b) { return a.file < b.file; });
  return entries;
}

std::size_t disk_clear(const fs::path& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string file = it->path().filename().string();
    const std::size_t temp = file.find(kTempMarker);
    // An entry, or a temporary file an interrupted store left behind (an entry's name + marker).
    if (parse_entry(it->path()) || (temp != std::string::npos && parse_entry(dir / file.substr(0, temp))))
      doomed.push_back(it->path());
  }
  for (const fs::path& p : doomed) removed += fs::remove(p, ec) ? 1 : 0;
  return removed;
}

std::string_view to_string(ImageSource s) {
  return s == ImageSource::memory ? "memory" : s == ImageSource::disk ? "disk" : "compiled";
}

namespace {

// RNNJIT_DUMP: the source, NVRTC's log and the image; a cubin also gets the PTX of its
// architecture (one more NVRTC compile, made only when dumping).
void dump_image(const std::string& source, const std::string& module, const Image& image) {
  if (!dump_enabled()) return;
  const std::string name = fmt::format("{}.{}", module, image.target.name());
  if (!image.target.cubin) {
    dump_files(name, {{"cu", source}, {"ptx", image.bytes}, {"log", image.log}});
    return;
  }
  std::string ptx;
  try {
    ptx = compile(source, module, image.target.name()).ptx;
  } catch (const Error& e) {
    ptx = fmt::format("// no PTX: {}\n", e.what());
  }
  dump_files(name, {{"cu", source}, {"ptx", ptx}, {"cubin", image.bytes}, {"log", image.log}});
}

}  // namespace

CachedImage cached_image(const std::string& source, const std::string& module, const std::string& symbol,
                         const Target& target) {
  const CacheKey key = cache_key(source, module, target);
  const std::string file = key.file_name();
  MemoryCache& m = memory();
  std::lock_guard lock(m.mutex);  // one compile per image, even when threads ask at once
  if (auto found = m.images.find(file); found != m.images.end()) return {found->second, key, ImageSource::memory};
  const std::optional<fs::path> dir = cache_dir();
  if (dir) {
    if (std::optional<std::string> bytes = disk_load(*dir, key, symbol)) {
      auto image = std::make_shared<const Image>(Image{target, std::move(*bytes), {}});
      m.images.emplace(file, image);
      log_verbose(fmt::format("cuda kernel {} for {}: loaded from {}", module, target.name(), (*dir / file).string()));
      return {image, key, ImageSource::disk};
    }
  }
  auto image = std::make_shared<const Image>(compile_image(source, module, target));
  if (image->bytes.find(symbol) == std::string::npos)
    throw Error(fmt::format("NVRTC's image of {} for {} has no kernel {}", module, target.name(), symbol));
  dump_image(source, module, *image);
  m.images.emplace(file, image);
  if (dir) {
    try {
      disk_store(*dir, key, image->bytes);
    } catch (const Error& e) {
      log_verbose(fmt::format("cuda kernel cache: {}", e.what()));
    }
  }
  log_verbose(fmt::format("cuda kernel {} for {}: compiled by NVRTC {}", module, target.name(), nvrtc_version()));
  return {image, key, ImageSource::compiled};
}

void forget_image(const CacheKey& key) {
  MemoryCache& m = memory();
  std::lock_guard lock(m.mutex);
  m.images.erase(key.file_name());
  if (const std::optional<fs::path> dir = cache_dir()) disk_remove(*dir, key);
}

}  // namespace rnnjit::cuda
