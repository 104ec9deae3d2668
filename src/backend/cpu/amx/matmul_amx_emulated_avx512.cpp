// The AMX kernels (matmul and attention) on the emulated tiles (amx_tiles.h): what the tests compare bit for bit with the
// VNNI kernel (int8) and with the instruction's documented arithmetic (bf16) on hosts without AMX,
// and what set_amx_emulation(true) routes the AMX paths to.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "backend/cpu/amx/amx_attention.h"
#include "backend/cpu/amx/amx_bf16_kernel.h"
#include "backend/cpu/amx/amx_kernel.h"
#include "backend/cpu/amx/matmul_amx.h"

namespace pagoda::backend::cpu::detail {

void matmul_packed_amx_emulated(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles) {
    amx_packed_matmul<AmxEmulated>(w, acts, n_tokens, y, pool, tiles);
}

void matmul_bf16_tiles_emulated(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles) {
    amx_bf16_matmul<AmxEmulated>(w, x, n_tokens, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail

namespace pagoda::backend::cpu::attention_detail {

void attend_amx_emulated(const Task& t) { amx_attend<detail::AmxEmulated>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
