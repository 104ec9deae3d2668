#include "backend/cpu/int8/int8_operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "backend/cpu/int8/int8_decode.h"
#include "quant/block_formats.h"

namespace pagoda::backend::cpu::detail {

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
    decode_row_local(type, row, cols, u, sw, mh);
}

}  // namespace pagoda::backend::cpu::detail
