// AVX2 + FMA + F16C path of the paged attention kernel: attention_simd.h over simd::Avx2, 8 keys'
// scores at a time summed by Avx2::sum8 (each lane hsum's tree), P.V two 8-float chunks per head at a
// time (up to 4 heads: 8 accumulators and 2 V chunks in 16 registers).
#include "backend/cpu/simd/avx2.h"
#include "backend/cpu/attention/attention_simd.h"

namespace pagoda::backend::cpu::attention_detail {
namespace {

struct AttentionAvx2 : simd::Avx2 {
    static constexpr int kAccChunks = 2, kConvertChunks = 1;
    static V row_scales(const uint8_t* const* r, int d) {  // in registers: a stored array's reload stalls
        return _mm256_setr_ps(q8_scale(r[0], d), q8_scale(r[1], d), q8_scale(r[2], d), q8_scale(r[3], d), q8_scale(r[4], d),
                              q8_scale(r[5], d), q8_scale(r[6], d), q8_scale(r[7], d));
    }
    static V sum_each(const V (&a)[8]) { return sum8(a); }
};

}  // namespace

void attend_avx2(const Task& t) { walk<SimdOps<AttentionAvx2>>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
