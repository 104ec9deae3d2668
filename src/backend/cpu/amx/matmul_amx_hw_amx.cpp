// The AMX kernels (int8: amx_kernel.h, bf16: amx_bf16_kernel.h, attention: amx_attention.h) on the
// AMX instructions. Compiled with -mamx-tile -mamx-int8 and the AVX-512 flags (CMakeLists.txt: *_amx.cpp); call only where amx_hardware_available() (the OS granted the tiles).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "backend/cpu/amx/amx_attention.h"
#include "backend/cpu/amx/amx_bf16_kernel.h"
#include "backend/cpu/amx/amx_kernel.h"
#include "backend/cpu/amx/matmul_amx.h"

namespace pagoda::backend::cpu::detail {
namespace {

// GCC 12's _tile_loadd / _tile_zero / _tile_dpbsud / _tile_stored macros paste their tile number
// into the instruction text (#dst), so a template argument cannot go through them. These emit the
// same instructions with the number as an immediate operand (%c: printed bare). The macros also do
// not tell the compiler that TILELOADD reads memory; the "memory" clobbers keep the B tile's stores
// (and the A rows') before the loads that read them.
struct AmxHardware {
    static void load_config(const AmxConfig& cfg) {
        __asm__ volatile("" : : "r"(&cfg) : "memory");  // the whole 64-byte operand is written by now
        _tile_loadconfig(&cfg);
    }
    template <int Tile>
    static void load(const void* base, int64_t stride) {
        __asm__ volatile("{tileloadd (%0,%1,1), %%tmm%c2|tileloadd %%tmm%c2, [%0+%1*1]}" : : "r"(base), "r"(stride), "i"(Tile) : "memory");
    }
    template <int Tile>
    static void zero() {
        __asm__ volatile("tilezero %%tmm%c0" : : "i"(Tile));
    }
    template <int C, int A, int B>
    static void dpbsud() {
        __asm__ volatile("{tdpbsud %%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbsud %%tmm%c0, %%tmm%c1, %%tmm%c2}" : : "i"(C), "i"(A), "i"(B));
    }
    template <int C, int A, int B>
    static void dpbssd() {
        __asm__ volatile("{tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbssd %%tmm%c0, %%tmm%c1, %%tmm%c2}" : : "i"(C), "i"(A), "i"(B));
    }
    template <int C, int A, int B>
    static void dpbf16ps() {
        __asm__ volatile("{tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbf16ps %%tmm%c0, %%tmm%c1, %%tmm%c2}" : : "i"(C), "i"(A), "i"(B));
    }
    template <int Tile>
    static void store(void* base, int64_t stride) {
        __asm__ volatile("{tilestored %%tmm%c2, (%0,%1,1)|tilestored [%0+%1*1], %%tmm%c2}" : : "r"(base), "r"(stride), "i"(Tile) : "memory");
    }
    static void release() { _tile_release(); }
};

}  // namespace

void matmul_packed_amx_hardware(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles) {
    amx_packed_matmul<AmxHardware>(w, acts, n_tokens, y, pool, tiles);
}

void matmul_bf16_tiles_hardware(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles) {
    amx_bf16_matmul<AmxHardware>(w, x, n_tokens, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail

namespace pagoda::backend::cpu::attention_detail {

namespace {
// VCVTNE2PS2BF16: every AMX host has AVX-512 BF16; bitwise the integer rounding (bf16_round.h).
struct NativeBf16 {
    static __m512i pairs(__m512 lo, __m512 hi) { return __m512i(_mm512_cvtne2ps_pbh(hi, lo)); }
};
}  // namespace

void attend_amx_hardware(const Task& t) { amx_attend<detail::AmxHardware, NativeBf16>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
