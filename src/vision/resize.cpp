// PIL-compatible bilinear and bicubic resampling (see resize.h). The coefficient layout follows PIL's
// documented algorithm (Pillow's Resample.c): per output pixel a window [first, first + count) of
// input pixels and normalised triangle weights, converted to fixed point.
#include "vision/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace pagoda::vision {

namespace {

constexpr int kFractionBits = 22;  // PIL's PRECISION_BITS (32 - 8 - 2)

struct Window {
    int64_t first = 0, count = 0;
    std::vector<int32_t> weights;  // fixed point
};

struct Filter {
    double (*at)(double);
    double support;
};

double triangle(double x) {
    x = std::fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5, PIL's BICUBIC.
double cubic(double x) {
    constexpr double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

std::vector<Window> windows(int64_t in_size, int64_t out_size, const Filter& filter) {
    const double scale = double(in_size) / double(out_size);
    const double filter_scale = std::max(scale, 1.0);
    const double support = filter.support * filter_scale;
    std::vector<Window> out(static_cast<size_t>(out_size));
    for (int64_t o = 0; o < out_size; ++o) {
        const double center = (double(o) + 0.5) * scale;
        // PIL truncates toward zero here (a C cast), then clamps.
        const int64_t first = std::max<int64_t>(int64_t(center - support + 0.5), 0);
        const int64_t last = std::min<int64_t>(int64_t(center + support + 0.5), in_size);
        Window& w = out[size_t(o)];
        w.first = first;
        w.count = last - first;
        std::vector<double> k(size_t(w.count));
        double total = 0;
        for (int64_t x = 0; x < w.count; ++x) {
            k[size_t(x)] = filter.at((double(x + first) - center + 0.5) / filter_scale);
            total += k[size_t(x)];
        }
        for (double& v : k) {
            if (total != 0) v /= total;
            const double f = v * double(1 << kFractionBits);
            w.weights.push_back(int32_t(v < 0 ? std::trunc(f - 0.5) : std::trunc(f + 0.5)));
        }
    }
    return out;
}

uint8_t clamp8(int64_t acc) {
    const int64_t v = acc >> kFractionBits;
    return uint8_t(std::clamp<int64_t>(v, 0, 255));
}

// One axis: `stride` bytes between neighbours along it, `lines` lines of it, `line_step` between them.
Image pass(const Image& in, int64_t out_w, int64_t out_h, bool horizontal, const Filter& filter) {
    Image out{.width = out_w, .height = out_h, .rgb = std::vector<uint8_t>(size_t(out_w * out_h * 3))};
    const auto ws = horizontal ? windows(in.width, out_w, filter) : windows(in.height, out_h, filter);
    for (int64_t y = 0; y < out_h; ++y)
        for (int64_t x = 0; x < out_w; ++x) {
            const Window& w = ws[size_t(horizontal ? x : y)];
            for (int c = 0; c < 3; ++c) {
                int64_t acc = int64_t(1) << (kFractionBits - 1);
                for (int64_t i = 0; i < w.count; ++i) {
                    const int64_t sx = horizontal ? w.first + i : x, sy = horizontal ? y : w.first + i;
                    acc += int64_t(in.rgb[size_t((sy * in.width + sx) * 3 + c)]) * w.weights[size_t(i)];
                }
                out.rgb[size_t((y * out_w + x) * 3 + c)] = clamp8(acc);
            }
        }
    return out;
}

Image resize(const Image& in, int64_t width, int64_t height, const Filter& filter) {
    if (width < 1 || height < 1) fail("resize: target size {}x{} is empty", width, height);
    if (in.width < 1 || in.height < 1 || in.rgb.size() != size_t(in.width * in.height * 3))
        fail("resize: the source image is empty or malformed");
    if (in.width == width && in.height == height) return in;
    Image horizontal = in.width == width ? in : pass(in, width, in.height, true, filter);
    if (in.height == height) return horizontal;
    return pass(horizontal, width, height, false, filter);
}

}  // namespace

Image resize_bilinear(const Image& in, int64_t width, int64_t height) {
    return resize(in, width, height, {triangle, 1.0});
}

Image resize_bicubic(const Image& in, int64_t width, int64_t height) { return resize(in, width, height, {cubic, 2.0}); }

}  // namespace pagoda::vision
