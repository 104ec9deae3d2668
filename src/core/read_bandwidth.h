// Streaming-read bandwidth, measured as the best of several access patterns.
//
// One sequential stream per thread is not the machine's read limit: on the AMD Zen 4 host it read
// 31 GB/s while decode loops read 47-57 GB/s in the same hour. So the limit is the best of the
// patterns below — 1, 2, 4 or 8 concurrent streams per thread, each with and without software
// prefetch — over the memory that matters (a model's own weight buffers, and a scratch buffer).
// Every pattern reads each byte of the given memory exactly once per round (checked by the tests
// through the sum it returns), so the figures differ only in how the bytes are requested.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"

namespace pagoda {

struct ReadPattern {
    int streams = 1;        // concurrent sequential streams per thread (a task's chunk cut into this many runs)
    bool prefetch = false;  // software prefetch (prefetcht0) of each stream, kReadPrefetchBytes ahead
    std::string name() const;  // e.g. "4 streams + prefetch"
};
inline constexpr size_t kReadPrefetchBytes = 1024;

// Every pattern measured: streams 1, 2, 4, 8, each without and with prefetch.
std::vector<ReadPattern> read_patterns();

struct ReadBandwidth {
    double gbps = 0;            // the best pattern's figure (GB/s, 1e9 bytes/s); 0 when nothing was read
    ReadPattern pattern;        // the pattern that gave it
    std::vector<double> by_pattern;  // each of read_patterns()'s figures, in that order
};

// Sum of the 64-bit words of `bytes` bytes at `data` read with `pattern` (any length: the tail that
// does not fill every stream is read by one stream). The sum keeps the reads from being optimised
// away and lets tests check that the pattern read every byte once.
uint64_t read_sum(const uint8_t* data, size_t bytes, const ReadPattern& pattern);

// One pattern over the given regions (chunked into tasks of at most 1 MiB, 64-byte aligned inside
// each region, so the unaligned edges and anything under 128 bytes are left out): the best of
// `rounds` rounds. Returns 0 when no chunk remains.
double measure_read_pattern(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions,
                            const ReadPattern& pattern, int rounds);
// Every pattern, `rounds` rounds each, the best kept.
ReadBandwidth measure_best_read_bandwidth(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions,
                                          int rounds = 2);

// A scratch buffer (bigger than the last-level cache), its pages faulted in once, to measure
// against beside a model's weights.
class ReadScratch {
public:
    explicit ReadScratch(size_t bytes);
    std::span<const uint8_t> bytes() const { return {buffer_.data(), buffer_.size()}; }

private:
    AlignedBuffer<uint8_t> buffer_;
};

// A decode step's read bound: the best pattern over a model's weight memory and over a scratch
// buffer, measured together (right before the run it bounds).
struct ReadBound {
    double gbps = 0;          // the higher of the two
    double weights_gbps = 0;  // the best pattern over the weights (0 without weights)
    double buffer_gbps = 0;   // the best pattern over the scratch buffer
    ReadPattern pattern;      // the pattern of `gbps`
    bool on_weights = false;  // whether `gbps` came from the weights
    std::string describe() const;  // e.g. "4 streams + prefetch over the weights"
};
ReadBound measure_read_bound(ThreadPool& pool, std::span<const std::span<const uint8_t>> weights,
                             const ReadScratch& scratch);

}  // namespace pagoda
