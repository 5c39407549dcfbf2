// rnnjit: the caches of compiled CUDA kernels, in memory and on disk. Builds without CUDA too
// (it only calls NVRTC through codegen/cuda/nvrtc.hpp), so `rnn-jit cache` works everywhere.
//
// On disk, under RNNJIT_CACHE_DIR (unset: $XDG_CACHE_HOME/rnnjit, else ~/.cache/rnnjit; set but
// empty: no disk cache), one file per image:
//     <module>.<target>.<key>.<cubin|ptx>      e.g. lstm_fwd_cuda_h800_c800_n20_ld800_u1.sm_90.0123456789abcdef.cubin
// where key hashes the source, the target, NVRTC's version and kGeneratorVersion, each
// length-prefixed, so any change to one of them is a different file. Files are written to a
// temporary name in the same directory and renamed into place, so readers (other processes
// included) see a whole file or none. A file that does not contain the kernel's symbol is
// treated as absent and rewritten.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc.hpp"

namespace rnnjit::cuda {

// The disk cache's directory, or nullopt when disabled (RNNJIT_CACHE_DIR set to "" or no home).
std::optional<std::filesystem::path> cache_dir();

struct CacheKey {
  std::string module;  // the kernel's name, or kUtilModule
  Target target;
  std::uint64_t hash = 0;
  std::string file_name() const;
};

CacheKey cache_key(const std::string& source, const std::string& module, const Target& target,
                   const std::string& nvrtc, std::uint32_t generator_version);
CacheKey cache_key(const std::string& source, const std::string& module, const Target& target);  // this build's

// The image stored under `key`, if present and it contains `symbol`.
std::optional<std::string> disk_load(const std::filesystem::path& dir, const CacheKey& key, const std::string& symbol);
// Writes atomically (temporary file, then rename); creates dir. Throws Error on failure.
void disk_store(const std::filesystem::path& dir, const CacheKey& key, const std::string& bytes);
// Removes the entry, if present.
void disk_remove(const std::filesystem::path& dir, const CacheKey& key);

struct DiskEntry {
  std::string file, module, target, key;  // parsed from the file name
  bool cubin = false;
  std::uintmax_t bytes = 0;
};
// The cache's entries, sorted by file name; files that are not entries are ignored.
std::vector<DiskEntry> disk_list(const std::filesystem::path& dir);
// Removes every entry and leftover temporary file (nothing else); returns how many files.
std::size_t disk_clear(const std::filesystem::path& dir);

enum class ImageSource { memory, disk, compiled };
std::string_view to_string(ImageSource s);

struct CachedImage {
  std::shared_ptr<const Image> image;
  CacheKey key;
  ImageSource source = ImageSource::compiled;
};

// The image of `source` for `target`: from memory, else from disk, else compiled by NVRTC
// and stored in both (a failed disk write is logged with RNNJIT_VERBOSE and otherwise ignored).
// `symbol` is a kernel the image must contain.
CachedImage cached_image(const std::string& source, const std::string& module, const std::string& symbol,
                         const Target& target);
// Drops an image that failed to load from both caches, so the next cached_image recompiles it.
void forget_image(const CacheKey& key);

}  // namespace rnnjit::cuda
