#include "kv/kv_q8.h"

#include <cmath>
#include <limits>

namespace pagoda::kv {

float quantize_row_q8(const float* x, int8_t* q, int64_t n) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) {
        finite = finite && std::isfinite(x[i]);
        amax = std::fmax(amax, std::fabs(x[i]));
    }
    const float scale = amax / 127.0f;
    if (scale == 0.0f || !finite) {
        // A row holding inf or NaN reads back as NaN (as an overflowed f16 row would poison
        // attention), never as plausible numbers.
        for (int64_t i = 0; i < n; ++i) q[i] = 0;
        return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    }
    quantize_codes_q8(x, scale, q, n);
    return scale;
}

void quantize_codes_q8(const float* x, float scale, int8_t* q, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        // x / scale can exceed 127 by an ulp for the largest element; clamp after rounding.
        const float r = std::nearbyint(x[i] / scale);
        q[i] = int8_t(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
    }
}

void dequantize_row_q8(const int8_t* q, float scale, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = float(q[i]) * scale;
}

}  // namespace pagoda::kv
