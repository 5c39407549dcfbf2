// rnnjit tests: a float buffer with an inaccessible page right against one of its ends, so that
// a kernel reading or writing a single element too far faults (SIGSEGV ends the test binary,
// which fails the test).
//
//   Guard::after   (default) the last element ends exactly at a page boundary, followed by a
//                  PROT_NONE page: any access past the end faults. The start is only 4-byte
//                  aligned, which also exercises unaligned loads and stores.
//   Guard::before  the first element starts exactly at a page boundary, preceded by a PROT_NONE
//                  page: any access before the start faults.
//
// read_only() write-protects the data pages, so that a kernel writing an input faults too.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace rnnjit::test {

enum class Guard { after, before };

class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(std::size_t n, Guard guard = Guard::after) : size_(n) {
    const std::size_t page = page_size();
    const std::size_t bytes = n * sizeof(float);
    data_pages_ = (bytes + page - 1) / page;
    map_bytes_ = (data_pages_ + 1) * page;
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<std::byte*>(m);
    std::byte* guard_page = guard == Guard::after ? map_ + data_pages_ * page : map_;
    if (::mprotect(guard_page, page, PROT_NONE) != 0) {
      ::munmap(map_, map_bytes_);
      throw std::runtime_error("GuardedBuffer: mprotect(PROT_NONE) failed");
    }
    data_pages_start_ = guard == Guard::after ? map_ : map_ + page;
    data_ = reinterpret_cast<float*>(guard == Guard::after ? guard_page - bytes : map_ + page);
  }

  ~GuardedBuffer() { release(); }

  GuardedBuffer(GuardedBuffer&& o) noexcept { *this = std::move(o); }
  GuardedBuffer& operator=(GuardedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      map_ = std::exchange(o.map_, nullptr);
      map_bytes_ = std::exchange(o.map_bytes_, 0);
      data_pages_start_ = std::exchange(o.data_pages_start_, nullptr);
      data_pages_ = std::exchange(o.data_pages_, 0);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::size_t size() const { return size_; }
  float& operator[](std::size_t i) { return data_[i]; }
  const float& operator[](std::size_t i) const { return data_[i]; }
  std::span<float> span() { return {data_, size_}; }
  std::span<const float> span() const { return {data_, size_}; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }

  void fill(float v) { std::fill(data_, data_ + size_, v); }
  void assign(std::span<const float> v) {
    if (v.size() != size_) throw std::invalid_argument("GuardedBuffer::assign: size mismatch");
    if (size_) std::memcpy(data_, v.data(), size_ * sizeof(float));
  }

  // Write-protects (or re-enables writing to) the pages holding the data.
  void read_only() { protect(PROT_READ); }
  void writable() { protect(PROT_READ | PROT_WRITE); }

  static std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

 private:
  void protect(int prot) {
    if (data_pages_ && ::mprotect(data_pages_start_, data_pages_ * page_size(), prot) != 0)
      throw std::runtime_error("GuardedBuffer: mprotect failed");
  }
  void release() {
    if (map_) ::munmap(map_, map_bytes_);
    map_ = nullptr;
  }

  std::byte* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::byte* data_pages_start_ = nullptr;
  std::size_t data_pages_ = 0;
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rnnjit::test
