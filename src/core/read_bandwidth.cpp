#include "core/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"

namespace pagoda {

uint64_t read_streams_sum_avx2(const uint8_t* data, size_t per, int streams, bool prefetch, size_t ahead);

namespace {

using Clock = std::chrono::steady_clock;

uint64_t word_at(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
}

// The portable twin of read_streams_sum_avx2 (the same words summed, in the same stream order).
uint64_t read_streams_sum_portable(const uint8_t* data, size_t per, int streams, bool prefetch) {
    uint64_t sum = 0;
    for (size_t i = 0; i < per; i += 128)
        for (int s = 0; s < streams; ++s) {
            const uint8_t* p = data + size_t(s) * per + i;
            if (prefetch) __builtin_prefetch(p + kReadPrefetchBytes);
            for (size_t k = 0; k < 128; k += 8) sum += word_at(p + k);
        }
    return sum;
}

// A pool round hands tasks to whichever thread is free, so the work is many small tasks (chunks of
// at most 1 MiB) and every thread stays busy until the end, as in machine_limits.cpp.
std::vector<std::span<const uint8_t>> chunks_of(std::span<const std::span<const uint8_t>> regions) {
    std::vector<std::span<const uint8_t>> chunks;
    for (const auto& r : regions) {
        const auto begin = reinterpret_cast<uintptr_t>(r.data());
        const size_t skip = std::min(r.size(), size_t((64 - begin % 64) % 64));
        const uint8_t* p = r.data() + skip;
        for (size_t left = (r.size() - skip) / 128 * 128; left > 0;) {
            const size_t n = std::min(left, size_t(1) << 20);
            chunks.emplace_back(p, n);
            p += n;
            left -= n;
        }
    }
    return chunks;
}

}  // namespace

std::string ReadPattern::name() const {
    return std::to_string(streams) + (streams == 1 ? " stream" : " streams") + (prefetch ? " + prefetch" : "");
}

std::vector<ReadPattern> read_patterns() {
    std::vector<ReadPattern> patterns;
    for (int streams : {1, 2, 4, 8})
        for (bool prefetch : {false, true}) patterns.push_back({streams, prefetch});
    return patterns;
}

uint64_t read_sum(const uint8_t* data, size_t bytes, const ReadPattern& pattern) {
    const int streams = pattern.streams;
    if (streams != 1 && streams != 2 && streams != 4 && streams != 8)
        fail("read pattern: {} streams per thread (1, 2, 4 or 8)", streams);
    const bool avx2 = active_isa() >= Isa::avx2;
    auto run = [&](const uint8_t* p, size_t per, int s) {
        return avx2 ? read_streams_sum_avx2(p, per, s, pattern.prefetch, kReadPrefetchBytes)
                    : read_streams_sum_portable(p, per, s, pattern.prefetch);
    };
    const size_t per = bytes / (128 * size_t(streams)) * 128;
    uint64_t sum = per > 0 ? run(data, per, streams) : 0;
    // The tail no stream filled: whole 128-byte blocks by one stream, then single words.
    const size_t done = per * size_t(streams);
    const size_t blocks = (bytes - done) / 128 * 128;
    if (blocks > 0) sum += run(data + done, blocks, 1);
    for (size_t i = done + blocks; i + 8 <= bytes; i += 8) sum += word_at(data + i);
    return sum;
}

double measure_read_pattern(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions,
                            const ReadPattern& pattern, int rounds) {
    const auto chunks = chunks_of(regions);
    if (chunks.empty()) return 0;
    size_t total = 0;
    for (const auto& c : chunks) total += c.size();
    std::vector<uint64_t> sink(chunks.size());
    double best = 1e30;
    for (int r = 0; r < std::max(1, rounds); ++r) {
        const auto start = Clock::now();
        pool.run(int(chunks.size()), [&](int task, int) {
            const auto& c = chunks[size_t(task)];
            sink[size_t(task)] += read_sum(c.data(), c.size(), pattern);
        });
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return double(total) / best / 1e9;
}

ReadBandwidth measure_best_read_bandwidth(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions,
                                          int rounds) {
    ReadBandwidth result;
    for (const ReadPattern& pattern : read_patterns()) {
        const double gbps = measure_read_pattern(pool, regions, pattern, rounds);
        result.by_pattern.push_back(gbps);
        if (gbps > result.gbps) result.gbps = gbps, result.pattern = pattern;
    }
    return result;
}

ReadScratch::ReadScratch(size_t bytes) : buffer_(bytes) {
    // Fault every page in (AlignedBuffer zeroes it already; a pattern makes the words differ).
    for (size_t i = 0; i < bytes; i += 4096) buffer_[i] = uint8_t(i >> 12);
}

std::string ReadBound::describe() const {
    if (gbps <= 0) return "not measured";
    return pattern.name() + (on_weights ? " over the weights" : " over a scratch buffer");
}

ReadBound measure_read_bound(ThreadPool& pool, std::span<const std::span<const uint8_t>> weights,
                             const ReadScratch& scratch) {
    ReadBound bound;
    const ReadBandwidth w = measure_best_read_bandwidth(pool, weights);
    const std::span<const uint8_t> region = scratch.bytes();
    const ReadBandwidth b = measure_best_read_bandwidth(pool, std::span(&region, 1));
    bound.weights_gbps = w.gbps;
    bound.buffer_gbps = b.gbps;
    bound.on_weights = w.gbps >= b.gbps && w.gbps > 0;
    bound.gbps = bound.on_weights ? w.gbps : b.gbps;
    bound.pattern = bound.on_weights ? w.pattern : b.pattern;
    return bound;
}

}  // namespace pagoda
