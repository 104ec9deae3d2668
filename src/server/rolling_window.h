// Time-windowed statistics for the dashboard: the last `n_slices` slices of `slice_seconds` each
// (e.g. 60 x 5 s = the last five minutes). Time is passed in explicitly (seconds on any monotonic
// clock), so tests drive it; a slice older than the window is reused for the current one.
//   RollingQuantiles: latency samples into log-spaced buckets (ratio 1.04, from 1 us; each bucket
//     answers with its geometric middle, clamped to the slice's min/max: within 2 % of the exact
//     nearest-rank quantile), memory bounded whatever the traffic.
//   RollingSums: named counters summed per slice (tokens, steps, requests), for rates.
// Not thread-safe: the owner (LiveStats) locks.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace pagoda::server {

// A ring slot never used yet (slice numbers can be negative: time before the clock's zero).
inline constexpr int64_t kUnused = std::numeric_limits<int64_t>::min();

struct WindowShape {
    double slice_seconds = 5;
    int32_t n_slices = 60;
    double window_seconds() const { return slice_seconds * n_slices; }
};

class RollingQuantiles {
public:
    explicit RollingQuantiles(WindowShape shape = {});

    // Records one value (seconds; negative or non-finite values are ignored) at time `now`.
    void add(double value, double now);

    struct Summary {
        int64_t count = 0;
        std::vector<double> quantiles;  // one per asked q; empty when count == 0
        double min = 0, max = 0;
    };
    // Over the slices that end after now - seconds (the whole window when seconds <= 0).
    Summary summary(double now, std::span<const double> qs, double seconds = 0) const;

    struct Point {
        double start = 0;  // slice start, same clock as `now`
        Summary summary;
    };
    // One point per slice of the window, oldest first; slices with no samples have count 0.
    std::vector<Point> series(double now, std::span<const double> qs) const;

    const WindowShape& shape() const { return shape_; }
    static int32_t bucket_of(double value);
    static double bucket_value(int32_t bucket);  // the bucket's geometric middle

private:
    struct Slice {
        int64_t index = kUnused;  // absolute slice number (floor(now / slice_seconds))
        std::vector<uint32_t> counts;  // sized on first use
        int64_t count = 0;
        double min = 0, max = 0;
    };
    Slice& slice_for(double now);
    Summary summarise(std::span<const Slice* const> slices, std::span<const double> qs) const;

    WindowShape shape_;
    std::vector<Slice> slices_;
};

class RollingSums {
public:
    RollingSums(WindowShape shape, int32_t n_channels);

    void add(int32_t channel, double amount, double now);
    // Sum of a channel over the slices that end after now - seconds (<= 0: the whole window).
    double sum(int32_t channel, double now, double seconds = 0) const;
    // Per slice of the window, oldest first: {slice start, sums of every channel}.
    struct Point {
        double start = 0;
        std::vector<double> sums;
    };
    std::vector<Point> series(double now) const;
    const WindowShape& shape() const { return shape_; }

private:
    struct Slice {
        int64_t index = kUnused;
        std::vector<double> sums;
    };
    WindowShape shape_;
    int32_t n_channels_;
    std::vector<Slice> slices_;
};

}  // namespace pagoda::server
