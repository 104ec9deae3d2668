// Internal: recurrent.h's causal_conv1d_f32 written once over a traits type S (load, store, load_n,
// store_n, set1, mul, fma (c + a * b), add, sub, div, exp), vectorised over the channels of one
// token; the tokens run in row order, each reading and sliding its slot's window, so a step in
// chunks and one token at a time give bitwise the same results. Internal linkage: each ISA file
// compiles its own copy with its own flags.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"

namespace pagoda::backend::cpu::detail {
namespace {

template <class S>
void causal_conv1d_t(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                     float* state, float* out, int64_t channel_begin, int64_t channel_end) {
    using V = typename S::V;
    const int64_t kept = op.kernel - 1, width = channel_end - channel_begin;
    // The taps transposed (tap j's weights of this range's channels contiguous), once per call.
    thread_local std::vector<float> taps;
    taps.resize(size_t(op.kernel * width));
    for (int64_t c = 0; c < width; ++c)
        for (int64_t j = 0; j < op.kernel; ++j) taps[size_t(j * width + c)] = weight[(channel_begin + c) * op.kernel + j];
    const V one = S::set1(1.0f), zero = S::set1(0.0f);
    for (int64_t t = 0; t < rows; ++t) {
        float* s = state + int64_t(op.state_rows[size_t(t)]) * kept * channels + channel_begin;
        const float* xt = x + t * channels + channel_begin;
        float* o = out + t * channels + channel_begin;
        for (int64_t c = 0; c < width; c += S::L) {
            const int w = int(std::min<int64_t>(S::L, width - c));
            auto load = [&](const float* p) { return w < S::L ? S::load_n(p, w) : S::load(p); };
            V sum = S::mul(load(taps.data() + kept * width + c), load(xt + c));
            for (int64_t j = 0; j < kept; ++j) sum = S::fma(load(taps.data() + j * width + c), load(s + j * channels + c), sum);
            if (op.silu) sum = S::div(sum, S::add(one, S::exp(S::sub(zero, sum))));
            if (w < S::L)
                S::store_n(o + c, sum, w);
            else
                S::store(o + c, sum);
        }
        // The window slides over this range's channels only.
        for (int64_t j = 0; j + 1 < kept; ++j)
            std::memcpy(s + j * channels, s + (j + 1) * channels, size_t(width) * sizeof(float));
        std::memcpy(s + (kept - 1) * channels, xt, size_t(width) * sizeof(float));
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
