#include "core/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace pagoda {

MappedFile::MappedFile(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail("cannot stat '{}': {}", path, std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("'{}' is not a regular file", path);
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            fail("cannot map '{}': {}", path, std::strerror(e));
        }
        data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void populate_pages(const void* p, size_t n) {
    if (!p || n == 0) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
#ifdef MADV_POPULATE_READ
    if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ) == 0) return;
#endif
    // Older kernels (before 5.14): read one byte of each page.
    const volatile uint8_t* bytes = reinterpret_cast<const volatile uint8_t*>(first);
    for (uintptr_t off = 0; first + off < end; off += page) (void)bytes[off];
}

}  // namespace pagoda
