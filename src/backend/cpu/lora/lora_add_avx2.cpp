// The LoRA row kernels (lora_kernels.h) on AVX2 + FMA + F16C, 8 lanes: lora_rows_simd.h over
// simd::Avx2, with 4 or 2 rank rows side by side for 1 or 2 rows (one for more: 2 x J x R
// accumulators must fit 16 registers) and up from B reduced by Avx2::sum8 (each lane hsum's tree).
#include "backend/cpu/simd/avx2.h"
#include "backend/cpu/lora/lora_rows_simd.h"

namespace pagoda::backend::cpu {
namespace {

struct LoraAvx2 : simd::Avx2 {
    static constexpr int down_rank_rows(int rows) { return rows == 1 ? 4 : rows == 2 ? 2 : 1; }
    static V sum_each(const V (&v)[8]) { return sum8(v); }
};

}  // namespace

void lora_down_avx2(const LoraDown& d) { lora_simd::down_any<LoraAvx2>(d); }
void lora_up_avx2(const LoraUp& u) { lora_simd::up_any<LoraAvx2>(u); }

}  // namespace pagoda::backend::cpu
