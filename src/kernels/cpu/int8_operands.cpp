#include "kernels/cpu/int8_operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/block_formats.h"

namespace pagoda::kernels::detail {

using gguf::GgmlType;
using namespace pagoda::quant;

namespace {

void quantize_token(const float* x, int64_t cols, int8_t* q, float* d, float* s) {
    for (int64_t b = 0; b < cols / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float scale = amax / 127.f;
        const float inv = amax > 0 ? 127.f / amax : 0.f;
        int sum[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
            int v = int(std::nearbyint(xb[i] * inv));
            v = std::clamp(v, -127, 127);
            q[b * 32 + i] = int8_t(v);
            sum[i / 16] += v;
        }
        d[b] = scale;
        s[2 * b] = scale * float(sum[0]);
        s[2 * b + 1] = scale * float(sum[1]);
    }
}

void set_half(float* sw, float* mh, int64_t b, float sw0, float mh0, float sw1, float mh1) {
    sw[2 * b] = sw0; sw[2 * b + 1] = sw1;
    mh[2 * b] = mh0; mh[2 * b + 1] = mh1;
}

}  // namespace

void quantize_activations(const float* x, int64_t n_tokens, int64_t cols, QuantizedActivations& out,
                          ThreadPool& pool) {
    out.n_tokens = n_tokens;
    out.cols = cols;
    out.n_blocks = cols / 32;
    out.q.resize(size_t(n_tokens * cols));
    out.d.resize(size_t(n_tokens * out.n_blocks));
    out.s.resize(size_t(n_tokens * 2 * out.n_blocks));
    auto one = [&](int t, int) {
        quantize_token(x + t * cols, cols, out.q.data() + t * cols, out.d.data() + t * out.n_blocks,
                       out.s.data() + t * 2 * out.n_blocks);
    };
    if (n_tokens * cols >= 16384) pool.run(int(n_tokens), one);
    else for (int t = 0; t < int(n_tokens); ++t) one(t, 0);
}

void decode_weight_row(GgmlType type, const uint8_t* row, int64_t cols, uint8_t* u, float* sw, float* mh) {
    const int64_t nb = cols / 32;
    switch (type) {
        case GgmlType::Q8_0: {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
            for (int64_t i = 0; i < nb; ++i) {
                const float d = f16_to_f32(b[i].d);
                for (int j = 0; j < 32; ++j) u[i * 32 + j] = uint8_t(int(b[i].qs[j]) + 128);
                set_half(sw, mh, i, d, -128.f * d, d, -128.f * d);
            }
            return;
        }
        case GgmlType::Q4_0:
        case GgmlType::Q4_1: {
            const bool q41 = type == GgmlType::Q4_1;
            for (int64_t i = 0; i < nb; ++i) {
                const uint8_t* blk = row + i * (q41 ? 20 : 18);
                uint16_t dh, mh16 = 0;
                std::memcpy(&dh, blk, 2);
                if (q41) std::memcpy(&mh16, blk + 2, 2);
                const uint8_t* qs = blk + (q41 ? 4 : 2);
                for (int j = 0; j < 16; ++j) {
                    u[i * 32 + j] = qs[j] & 0x0f;
                    u[i * 32 + 16 + j] = qs[j] >> 4;
                }
                const float d = f16_to_f32(dh);
                const float m = q41 ? f16_to_f32(mh16) : -8.f * d;
                set_half(sw, mh, i, d, m, d, m);
            }
            return;
        }
        case GgmlType::Q4_K:
        case GgmlType::Q5_K: {
            const bool q5 = type == GgmlType::Q5_K;
            for (int64_t sb = 0; sb < nb / 8; ++sb) {
                const uint8_t* blk = row + sb * (q5 ? 176 : 144);
                uint16_t dh, dminh;
                std::memcpy(&dh, blk, 2);
                std::memcpy(&dminh, blk + 2, 2);
                const uint8_t* scales = blk + 4;
                const uint8_t* qh = q5 ? blk + 16 : nullptr;
                const uint8_t* qs = blk + (q5 ? 48 : 16);
                const float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
                uint8_t* ub = u + sb * 256;
                for (int p = 0; p < 4; ++p) {
                    for (int l = 0; l < 32; ++l) {
                        ub[64 * p + l] = qs[32 * p + l] & 0x0f;
                        ub[64 * p + 32 + l] = qs[32 * p + l] >> 4;
                    }
                    if (q5)
                        for (int l = 0; l < 32; ++l) {
                            ub[64 * p + l] |= uint8_t(((qh[l] >> (2 * p)) & 1) << 4);
                            ub[64 * p + 32 + l] |= uint8_t(((qh[l] >> (2 * p + 1)) & 1) << 4);
                        }
                }
                for (int j = 0; j < 8; ++j) {
                    uint8_t sc, m;
                    k_scale_min(j, scales, sc, m);
                    const float s = d * float(sc), mn = -(dmin * float(m));
                    set_half(sw, mh, sb * 8 + j, s, mn, s, mn);
                }
            }
            return;
        }
        case GgmlType::Q6_K: {
            for (int64_t sb = 0; sb < nb / 8; ++sb) {
                const auto* blk = reinterpret_cast<const BlockQ6_K*>(row + sb * 210);
                const float d = f16_to_f32(blk->d);
                uint8_t* ub = u + sb * 256;
                for (int h = 0; h < 2; ++h) {
                    const uint8_t* ql = blk->ql + 64 * h;
                    const uint8_t* qh = blk->qh + 32 * h;
                    for (int l = 0; l < 32; ++l) {
                        ub[128 * h + l] = uint8_t((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
                        ub[128 * h + 32 + l] = uint8_t((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
                        ub[128 * h + 64 + l] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                        ub[128 * h + 96 + l] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                    }
                }
                // 32-block j of the super-block covers the 16-value sub-blocks 2j and 2j+1.
                for (int j = 0; j < 8; ++j) {
                    const float s0 = d * float(blk->scales[2 * j]), s1 = d * float(blk->scales[2 * j + 1]);
                    set_half(sw, mh, sb * 8 + j, s0, -32.f * s0, s1, -32.f * s1);
                }
            }
            return;
        }
        default:
            return;
    }
}

}  // namespace pagoda::kernels::detail
