#include "core/mapped_file.h"

#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>
#include <vector>

#include "core/error.h"
#include "fixtures.h"

namespace pagoda {
namespace {

// Whether the page holding p is mapped in this process's page tables (/proc/self/pagemap bit 63);
// -1 where the kernel does not say.
int page_present(const void* p) {
    const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const long page = sysconf(_SC_PAGESIZE);
    uint64_t entry = 0;
    const off_t at = off_t(reinterpret_cast<uintptr_t>(p) / uintptr_t(page) * sizeof(entry));
    const ssize_t got = ::pread(fd, &entry, sizeof(entry), at);
    ::close(fd);
    if (got != ssize_t(sizeof(entry))) return -1;
    return int(entry >> 63);
}

std::string write_pattern_file(const std::string& name, size_t bytes) {
    const std::string path = test::temp_path(name);
    std::vector<char> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = char(i * 131 + 7);
    std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(bytes));
    return path;
}

TEST(MappedFile, MapsTheWholeFileReadOnly) {
    const std::string path = write_pattern_file("mapped.bin", 10000);
    MappedFile f(path);
    ASSERT_EQ(f.size(), 10000u);
    for (size_t i = 0; i < f.size(); i += 997) EXPECT_EQ(f.data()[i], uint8_t(char(i * 131 + 7))) << i;
    EXPECT_THROW(MappedFile(test::temp_path("no-such-file.bin")), Error);
}

TEST(MappedFile, PopulatePagesMapsEveryPageOfTheRangeAndNoOther) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    // The page outside the range lies over 2 MiB from it: neither the kernel's fault-around (which
    // maps neighbours of a faulting page) nor a huge folio mapped whole can reach it.
    const size_t pages = 2048;
    const std::string path = write_pattern_file("populate.bin", pages * page);
    MappedFile f(path);
    const uint8_t* base = f.data();
    const uint8_t* probe_in = base + 100 * page;
    const uint8_t* probe_out = base + 1900 * page;
    if (page_present(probe_in) < 0) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
    ASSERT_EQ(page_present(probe_in), 0) << "a fresh mapping's page is already mapped";
    ASSERT_EQ(page_present(probe_out), 0);
    // An unaligned range from inside page 90 to inside page 110.
    populate_pages(base + 90 * page + 123, 20 * page);
    EXPECT_EQ(page_present(base + 90 * page), 1);
    EXPECT_EQ(page_present(probe_in), 1);
    EXPECT_EQ(page_present(base + 110 * page), 1);
    EXPECT_EQ(page_present(probe_out), 0) << "a page outside the range was mapped";
    // Nothing to do: no range, no pointer; the bytes are untouched.
    populate_pages(base, 0);
    populate_pages(nullptr, 4096);
    for (size_t i = 90 * page; i < 111 * page; i += 1009) EXPECT_EQ(base[i], uint8_t(char(i * 131 + 7))) << i;
}

}  // namespace
}  // namespace pagoda
