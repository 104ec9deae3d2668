// Owned, 64-byte aligned, zero-initialised storage for activations, KV and repacked weights.
// Large buffers are advised onto huge pages (fewer TLB misses when scanned every token).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <utility>

namespace pagoda {

template <class T>
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t n) { resize(n); }
    ~AlignedBuffer() { std::free(data_); }
    AlignedBuffer(AlignedBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        if (this != &o) { std::free(data_); data_ = std::exchange(o.data_, nullptr); size_ = std::exchange(o.size_, 0); }
        return *this;
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;

    // Discards the contents; the new buffer is zeroed.
    void resize(size_t n) {
        std::free(data_);
        data_ = nullptr;
        size_ = n;
        if (n == 0) return;
        size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
        size_t align = bytes >= (size_t(4) << 20) ? (size_t(2) << 20) : 64;
        bytes = (bytes + align - 1) / align * align;
        data_ = static_cast<T*>(std::aligned_alloc(align, bytes));
        if (!data_) throw std::bad_alloc();
        if (align > 64) ::madvise(data_, bytes, MADV_HUGEPAGE);
        std::memset(static_cast<void*>(data_), 0, bytes);
    }

    T* data() { return data_; }
    const T* data() const { return data_; }
    size_t size() const { return size_; }
    T& operator[](size_t i) { return data_[i]; }
    const T& operator[](size_t i) const { return data_[i]; }

private:
    T* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace pagoda
