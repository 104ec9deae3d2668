// Portable reference path of the paged attention kernel (any x86-64, any head_dim): plain loops,
// each score summed element by element in index order; a q8 row's dot (or V weight) is scaled by
// the row's scale.
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "backend/cpu/attention/attention_walk.h"

namespace pagoda::backend::cpu::attention_detail {
namespace {

template <kv::KvDtype DT>
inline float load(const uint8_t* row, int i) {
    if constexpr (DT == kv::KvDtype::f32) {
        float f;
        std::memcpy(&f, row + 4 * i, 4);
        return f;
    } else if constexpr (DT == kv::KvDtype::q8) {
        return float(int8_t(row[i]));
    } else {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        if constexpr (DT == kv::KvDtype::f16) return f16_to_f32(h);
        else return bf16_to_f32(h);
    }
}

// A row's q8 scale (1 for the float types, whose rows need none).
template <kv::KvDtype DT>
inline float row_scale(const uint8_t* row, int d) {
    if constexpr (DT == kv::KvDtype::q8) {
        float f;
        std::memcpy(&f, row + kv::q8_scale_offset(d), 4);
        return f;
    } else {
        return 1.0f;
    }
}

struct ScalarOps {
    template <kv::KvDtype DT>
    static void convert(const uint8_t* const* rows, int n, int d, int ld, float* dst) {
        for (int r = 0; r < n; ++r) {
            float* o = dst + size_t(r) * ld;
            for (int i = 0; i < d; ++i) o[i] = load<DT>(rows[r], i);
            for (int i = d; i < ld; ++i) o[i] = 0.0f;
        }
    }
    template <kv::KvDtype DT>
    static void scores(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s) {
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int i = 0; i < d; ++i) sum += q[i] * load<DT>(rows[j], i);
            if constexpr (DT == kv::KvDtype::q8) sum *= row_scale<DT>(rows[j], d);
            s[j] = sum * scale;
        }
    }
    template <kv::KvDtype DT>
    static void accumulate(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows, int n,
                           int d) {
        for (int h = 0; h < heads; ++h)
            for (int j = 0; j < n; ++j) {
                const float pj = DT == kv::KvDtype::q8 ? p[h][j] * row_scale<DT>(rows[j], d) : p[h][j];
                for (int i = 0; i < d; ++i) acc[h][i] += pj * load<DT>(rows[j], i);
            }
    }
    static void scale(float* acc, float c, int d) {
        for (int i = 0; i < d; ++i) acc[i] *= c;
    }
    static float max(const float* s, int n) {
        float best = s[0];
        for (int j = 1; j < n; ++j) best = s[j] > best ? s[j] : best;
        return best;
    }
    static float exp_sum(float* s, int n, float m) {
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
            s[j] = std::exp(s[j] - m);
            sum += s[j];
        }
        return sum;
    }
};

}  // namespace

void attend_scalar(const Task& t) { walk<ScalarOps>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
