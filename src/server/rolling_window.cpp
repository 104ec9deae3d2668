#include "server/rolling_window.h"

#include <algorithm>
#include <cmath>

namespace pagoda::server {

namespace {
constexpr double kMinValue = 1e-6;  // bucket 0 holds everything up to a microsecond
constexpr double kRatio = 1.04;
constexpr int32_t kBuckets = 600;   // up to 1e-6 * 1.04^599, about 1.6e4 s
const double kLogRatio = std::log(kRatio);

int64_t slice_index(double now, double slice_seconds) { return int64_t(std::floor(now / slice_seconds)); }

// The absolute slice numbers in [first, current] that the window (or its last `seconds`) covers.
std::pair<int64_t, int64_t> covered(double now, const WindowShape& shape, double seconds) {
    const int64_t current = slice_index(now, shape.slice_seconds);
    int64_t first = current - shape.n_slices + 1;
    if (seconds > 0) {
        // A slice counts if it ends after now - seconds.
        const int64_t from = int64_t(std::floor((now - seconds) / shape.slice_seconds));
        first = std::max(first, from);
    }
    return {first, current};
}
}  // namespace

// ---- RollingQuantiles ----

RollingQuantiles::RollingQuantiles(WindowShape shape) : shape_(shape), slices_(size_t(std::max(1, shape.n_slices))) {
    if (shape_.n_slices < 1) shape_.n_slices = 1;
    if (!(shape_.slice_seconds > 0)) shape_.slice_seconds = 1;
}

int32_t RollingQuantiles::bucket_of(double value) {
    if (value <= kMinValue) return 0;
    const double k = std::floor(std::log(value / kMinValue) / kLogRatio) + 1;
    return int32_t(std::min<double>(kBuckets - 1, k));
}

double RollingQuantiles::bucket_value(int32_t bucket) {
    if (bucket <= 0) return kMinValue / 2;
    return kMinValue * std::pow(kRatio, double(bucket) - 0.5);
}

RollingQuantiles::Slice& RollingQuantiles::slice_for(double now) {
    const int64_t index = slice_index(now, shape_.slice_seconds);
    Slice& s = slices_[size_t(((index % shape_.n_slices) + shape_.n_slices) % shape_.n_slices)];
    if (s.index != index) {  // unused, or left over from an older round of the ring
        s.index = index;
        s.counts.assign(size_t(kBuckets), 0);
        s.count = 0;
        s.min = s.max = 0;
    }
    return s;
}

void RollingQuantiles::add(double value, double now) {
    if (!std::isfinite(value) || value < 0) return;
    Slice& s = slice_for(now);
    ++s.counts[size_t(bucket_of(value))];
    s.min = s.count == 0 ? value : std::min(s.min, value);
    s.max = s.count == 0 ? value : std::max(s.max, value);
    ++s.count;
}

RollingQuantiles::Summary RollingQuantiles::summarise(std::span<const Slice* const> slices,
                                                      std::span<const double> qs) const {
    Summary out;
    for (const Slice* s : slices) {
        if (s->count == 0) continue;
        out.min = out.count == 0 ? s->min : std::min(out.min, s->min);
        out.max = out.count == 0 ? s->max : std::max(out.max, s->max);
        out.count += s->count;
    }
    if (out.count == 0) return out;
    for (double q : qs) {
        // Nearest rank: the smallest value with at least ceil(q * count) samples at or below it.
        const int64_t rank = std::clamp<int64_t>(int64_t(std::ceil(q * double(out.count))), 1, out.count);
        double value = out.max;
        if (rank == 1) value = out.min;
        else if (rank < out.count) {
            int64_t seen = 0;
            for (int32_t b = 0; b < kBuckets; ++b) {
                for (const Slice* s : slices)
                    if (s->count) seen += s->counts[size_t(b)];
                if (seen >= rank) {
                    value = std::clamp(bucket_value(b), out.min, out.max);
                    break;
                }
            }
        }
        out.quantiles.push_back(value);
    }
    return out;
}

RollingQuantiles::Summary RollingQuantiles::summary(double now, std::span<const double> qs, double seconds) const {
    const auto [first, current] = covered(now, shape_, seconds);
    std::vector<const Slice*> live;
    for (const Slice& s : slices_)
        if (s.index >= first && s.index <= current) live.push_back(&s);
    return summarise(live, qs);
}

std::vector<RollingQuantiles::Point> RollingQuantiles::series(double now, std::span<const double> qs) const {
    const auto [first, current] = covered(now, shape_, 0);
    std::vector<Point> out;
    for (int64_t i = first; i <= current; ++i) {
        const Slice& s = slices_[size_t(((i % shape_.n_slices) + shape_.n_slices) % shape_.n_slices)];
        Point p;
        p.start = double(i) * shape_.slice_seconds;
        if (s.index == i) {
            const Slice* one[] = {&s};
            p.summary = summarise(one, qs);
        }
        out.push_back(std::move(p));
    }
    return out;
}

// ---- RollingSums ----

RollingSums::RollingSums(WindowShape shape, int32_t n_channels)
    : shape_(shape), n_channels_(std::max(1, n_channels)), slices_(size_t(std::max(1, shape.n_slices))) {
    if (shape_.n_slices < 1) shape_.n_slices = 1;
    if (!(shape_.slice_seconds > 0)) shape_.slice_seconds = 1;
}

void RollingSums::add(int32_t channel, double amount, double now) {
    if (channel < 0 || channel >= n_channels_ || !std::isfinite(amount)) return;
    const int64_t index = slice_index(now, shape_.slice_seconds);
    Slice& s = slices_[size_t(((index % shape_.n_slices) + shape_.n_slices) % shape_.n_slices)];
    if (s.index != index) {
        s.index = index;
        s.sums.assign(size_t(n_channels_), 0.0);
    }
    s.sums[size_t(channel)] += amount;
}

double RollingSums::sum(int32_t channel, double now, double seconds) const {
    if (channel < 0 || channel >= n_channels_) return 0;
    const auto [first, current] = covered(now, shape_, seconds);
    double total = 0;
    for (const Slice& s : slices_)
        if (s.index >= first && s.index <= current) total += s.sums[size_t(channel)];
    return total;
}

std::vector<RollingSums::Point> RollingSums::series(double now) const {
    const auto [first, current] = covered(now, shape_, 0);
    std::vector<Point> out;
    for (int64_t i = first; i <= current; ++i) {
        const Slice& s = slices_[size_t(((i % shape_.n_slices) + shape_.n_slices) % shape_.n_slices)];
        Point p;
        p.start = double(i) * shape_.slice_seconds;
        p.sums = s.index == i ? s.sums : std::vector<double>(size_t(n_channels_), 0.0);
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace pagoda::server
