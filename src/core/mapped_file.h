// A read-only memory map of a whole file. Model weights are used in place from the map (zero copy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pagoda {

class MappedFile {
public:
    explicit MappedFile(const std::string& path);  // throws pagoda::Error naming the path on failure
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

// Maps every page of [p, p + n) into this process's page tables now (MADV_POPULATE_READ, or a read
// of each page where the kernel predates it), so later reads take no page fault. For weights read
// a row at a time (the token embedding): a first touch of a file page costs a fault per step, tens
// of microseconds in a VM and a disk read if the page was never loaded.
void populate_pages(const void* p, size_t n);

}  // namespace pagoda
