// Internal: the AMX tile operations the AMX kernel (amx_kernel.h) is written against. Two traits
// offer the same static interface:
//   AmxHardware (matmul_amx_hw_amx.cpp): the instructions themselves;
//   AmxEmulated (below, amx_emulated.cpp): the same semantics in plain C++ on a per-thread register
//     file of 8 tiles x 1 KiB, so the one algorithm runs, and is tested bit for bit, on hosts
//     without AMX.
// Interface (Tile, C, A, B: tile register numbers 0-7, template arguments because the instructions
// encode them as immediates):
//   load_config(cfg)            LDTILECFG: palette 1 shapes (rows <= 16, colsb <= 64); zeroes all tiles
//   load<Tile>(base, stride)    TILELOADD: row r (< rows) = colsb bytes at base + r * stride; the
//                               rest of the register becomes zero
//   zero<Tile>()                TILEZERO
//   dpbsud<C, A, B>()           TDPBSUD: for m < rows(C), n < colsb(C) / 4:
//                               C[m][n] += sum over k < colsb(A) / 4, i < 4 of
//                                          s8(A[m][4k + i]) * u8(B[k][4n + i])   (int32, wrapping)
//                               shapes must agree: rows(A) = rows(C), colsb(A) / 4 = rows(B),
//                               colsb(B) = colsb(C)
//   dpbssd<C, A, B>()           TDPBSSD: the same with B signed too: s8(A) * s8(B)
//   dpbf16ps<C, A, B>()         TDPBF16PS (AMX-BF16), as the current Intel SDM describes it: for
//                               m < rows(C), n < colsb(C) / 4, two f32 chains from +0,
//                                 even = fma(A[m].bf16[2k],   B[k].bf16[2n],   even)
//                                 odd  = fma(A[m].bf16[2k+1], B[k].bf16[2n+1], odd)   for k < colsb(A) / 4
//                               then C[m][n] = C[m][n] + (even + odd); every operation rounds to
//                               nearest even, reads denormal inputs as zero and flushes denormal
//                               results to zero (MXCSR is ignored). Same shape rules as dpbsud.
//   store<Tile>(base, stride)   TILESTORED: rows x colsb bytes
//   release()                   TILERELEASE: back to the init state
// The emulation refuses (pagoda::Error) what the hardware faults on: an unconfigured tile, a bad
// shape, mismatched shapes.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu::detail {

// The 64-byte LDTILECFG operand, palette 1.
struct alignas(64) AmxConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};  // bytes per row of tile i (tiles 8-15 must stay 0 in palette 1)
    uint8_t rows[16] = {};
};
static_assert(sizeof(AmxConfig) == 64);

constexpr int kAmxTiles = 8, kAmxMaxRows = 16, kAmxMaxColsb = 64;

// The emulation's operations on the calling thread's register file (amx_emulated.cpp).
void amx_emu_load_config(const AmxConfig& cfg);
void amx_emu_load(int tile, const void* base, int64_t stride);
void amx_emu_zero(int tile);
void amx_emu_dpbsud(int c, int a, int b);
void amx_emu_dpbssd(int c, int a, int b);
void amx_emu_dpbf16ps(int c, int a, int b);
void amx_emu_store(int tile, void* base, int64_t stride);
void amx_emu_release();

struct AmxEmulated {
    static void load_config(const AmxConfig& cfg) { amx_emu_load_config(cfg); }
    template <int Tile>
    static void load(const void* base, int64_t stride) { amx_emu_load(Tile, base, stride); }
    template <int Tile>
    static void zero() { amx_emu_zero(Tile); }
    template <int C, int A, int B>
    static void dpbsud() { amx_emu_dpbsud(C, A, B); }
    template <int C, int A, int B>
    static void dpbssd() { amx_emu_dpbssd(C, A, B); }
    template <int C, int A, int B>
    static void dpbf16ps() { amx_emu_dpbf16ps(C, A, B); }
    template <int Tile>
    static void store(void* base, int64_t stride) { amx_emu_store(Tile, base, stride); }
    static void release() { amx_emu_release(); }
};

}  // namespace pagoda::backend::cpu::detail
