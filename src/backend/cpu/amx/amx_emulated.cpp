// The AMX emulation (contract: amx_tiles.h). Plain C++, no ISA flags: the semantics are those of the
// Intel SDM's LDTILECFG, TILELOADD, TILEZERO, TDPBSUD, TDPBF16PS, TILESTORED and TILERELEASE for
// palette 1.
#include <cmath>
#include <cstring>

#include "backend/cpu/amx/amx_tiles.h"
#include "core/error.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct RegisterFile {
    bool configured = false;
    AmxConfig cfg;
    alignas(64) uint8_t tile[kAmxTiles][kAmxMaxRows * kAmxMaxColsb];
};
thread_local RegisterFile t_regs;

RegisterFile& configured_regs(int tile, const char* op) {
    RegisterFile& r = t_regs;
    if (!r.configured) fail("AMX emulation: {} before LDTILECFG (or after TILERELEASE)", op);
    if (tile < 0 || tile >= kAmxTiles) fail("AMX emulation: {}: no tile register {}", op, tile);
    if (r.cfg.rows[tile] == 0 || r.cfg.colsb[tile] == 0) fail("AMX emulation: {}: tile {} is not configured", op, tile);
    return r;
}

int32_t dword(const uint8_t* row, int i) {
    int32_t v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
}

// The checks both dot-product instructions share: three distinct configured tiles whose shapes agree.
const AmxConfig& dot_shapes(int c, int a, int b, const char* op) {
    RegisterFile& r = configured_regs(c, op);
    (void)configured_regs(a, op);
    (void)configured_regs(b, op);
    const AmxConfig& cfg = r.cfg;
    if (c == a || c == b || a == b) fail("AMX emulation: {} needs three different tiles ({}, {}, {})", op, c, a, b);
    if (cfg.colsb[c] % 4 || cfg.colsb[a] % 4 || cfg.rows[a] != cfg.rows[c] || cfg.colsb[a] / 4 != cfg.rows[b] ||
        cfg.colsb[b] != cfg.colsb[c])
        fail("AMX emulation: {} shapes do not agree (C {}x{}, A {}x{}, B {}x{} rows x bytes)", op, cfg.rows[c], cfg.colsb[c],
             cfg.rows[a], cfg.colsb[a], cfg.rows[b], cfg.colsb[b]);
    return cfg;
}

// The instruction zeroes the bytes past colsb of each written row and the rows past rows(C).
void clear_outside(uint8_t* tile, const AmxConfig& cfg, int c) {
    for (int m = 0; m < cfg.rows[c]; ++m)
        std::memset(tile + m * kAmxMaxColsb + cfg.colsb[c], 0, size_t(kAmxMaxColsb - cfg.colsb[c]));
    std::memset(tile + cfg.rows[c] * kAmxMaxColsb, 0, size_t((kAmxMaxRows - cfg.rows[c]) * kAmxMaxColsb));
}

// TDPBF16PS arithmetic: denormal inputs read as signed zero, denormal results become signed zero.
float daz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.f, v) : v; }
float ftz(float v) { return daz(v); }
float bf16_operand(const uint8_t* row, int i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const uint32_t bits = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return daz(v);
}

}  // namespace

void amx_emu_load_config(const AmxConfig& cfg) {
    RegisterFile& r = t_regs;
    if (cfg.palette == 0) {  // the init state, as TILERELEASE
        amx_emu_release();
        return;
    }
    if (cfg.palette != 1) fail("AMX emulation: palette {} is not supported (palette 1 only)", cfg.palette);
    for (uint8_t b : cfg.reserved)
        if (b) fail("AMX emulation: reserved configuration bytes must be zero");
    for (int i = 0; i < 16; ++i) {
        const bool in_palette = i < kAmxTiles;
        if (!in_palette && (cfg.rows[i] || cfg.colsb[i])) fail("AMX emulation: tile {} does not exist in palette 1", i);
        if (cfg.rows[i] > kAmxMaxRows || cfg.colsb[i] > kAmxMaxColsb)
            fail("AMX emulation: tile {} is {} rows x {} bytes (at most {} x {})", i, cfg.rows[i], cfg.colsb[i], kAmxMaxRows,
                 kAmxMaxColsb);
        if ((cfg.rows[i] == 0) != (cfg.colsb[i] == 0))
            fail("AMX emulation: tile {} has {} rows of {} bytes (both or neither must be zero)", i, cfg.rows[i], cfg.colsb[i]);
    }
    r.cfg = cfg;
    r.cfg.start_row = 0;  // no restart of interrupted loads here
    r.configured = true;
    std::memset(r.tile, 0, sizeof r.tile);
}

void amx_emu_load(int tile, const void* base, int64_t stride) {
    RegisterFile& r = configured_regs(tile, "TILELOADD");
    uint8_t* t = r.tile[tile];
    std::memset(t, 0, sizeof r.tile[tile]);
    const auto* src = static_cast<const uint8_t*>(base);
    for (int row = 0; row < r.cfg.rows[tile]; ++row) std::memcpy(t + row * kAmxMaxColsb, src + row * stride, r.cfg.colsb[tile]);
}

void amx_emu_zero(int tile) {
    RegisterFile& r = configured_regs(tile, "TILEZERO");
    std::memset(r.tile[tile], 0, sizeof r.tile[tile]);
}

namespace {
// TDPBSUD (B unsigned) and TDPBSSD (B signed): A is signed in both.
template <bool SignedB>
void int8_dot(int c, int a, int b, const char* what) {
    const AmxConfig& cfg = dot_shapes(c, a, b, what);
    RegisterFile& r = t_regs;
    const int k_groups = cfg.colsb[a] / 4, n_cols = cfg.colsb[c] / 4;
    for (int m = 0; m < cfg.rows[c]; ++m) {
        uint8_t* crow = r.tile[c] + m * kAmxMaxColsb;
        const uint8_t* arow = r.tile[a] + m * kAmxMaxColsb;
        for (int n = 0; n < n_cols; ++n) {
            // Unsigned arithmetic: the instruction wraps where int32 overflow would be undefined.
            uint32_t acc = uint32_t(dword(crow, n));
            for (int k = 0; k < k_groups; ++k) {
                const uint8_t* brow = r.tile[b] + k * kAmxMaxColsb;
                for (int i = 0; i < 4; ++i) {
                    const int32_t bv = SignedB ? int32_t(int8_t(brow[4 * n + i])) : int32_t(brow[4 * n + i]);
                    acc += uint32_t(int32_t(int8_t(arow[4 * k + i])) * bv);
                }
            }
            std::memcpy(crow + 4 * n, &acc, 4);
        }
    }
    clear_outside(r.tile[c], cfg, c);
}
}  // namespace

void amx_emu_dpbsud(int c, int a, int b) { int8_dot<false>(c, a, b, "TDPBSUD"); }
void amx_emu_dpbssd(int c, int a, int b) { int8_dot<true>(c, a, b, "TDPBSSD"); }

void amx_emu_dpbf16ps(int c, int a, int b) {
    const AmxConfig& cfg = dot_shapes(c, a, b, "TDPBF16PS");
    RegisterFile& r = t_regs;
    const int k_pairs = cfg.colsb[a] / 4, n_cols = cfg.colsb[c] / 4;
    for (int m = 0; m < cfg.rows[c]; ++m) {
        uint8_t* crow = r.tile[c] + m * kAmxMaxColsb;
        const uint8_t* arow = r.tile[a] + m * kAmxMaxColsb;
        for (int n = 0; n < n_cols; ++n) {
            float even = 0.f, odd = 0.f;
            for (int k = 0; k < k_pairs; ++k) {
                const uint8_t* brow = r.tile[b] + k * kAmxMaxColsb;
                even = ftz(std::fma(bf16_operand(arow, 2 * k), bf16_operand(brow, 2 * n), even));
                odd = ftz(std::fma(bf16_operand(arow, 2 * k + 1), bf16_operand(brow, 2 * n + 1), odd));
            }
            float acc;
            std::memcpy(&acc, crow + 4 * n, 4);
            acc = ftz(daz(acc) + ftz(even + odd));
            std::memcpy(crow + 4 * n, &acc, 4);
        }
    }
    clear_outside(r.tile[c], cfg, c);
}

void amx_emu_store(int tile, void* base, int64_t stride) {
    RegisterFile& r = configured_regs(tile, "TILESTORED");
    auto* dst = static_cast<uint8_t*>(base);
    for (int row = 0; row < r.cfg.rows[tile]; ++row)
        std::memcpy(dst + row * stride, r.tile[tile] + row * kAmxMaxColsb, r.cfg.colsb[tile]);
}

void amx_emu_release() {
    RegisterFile& r = t_regs;
    r.configured = false;
    r.cfg = AmxConfig{};
    std::memset(r.tile, 0, sizeof r.tile);
}

}  // namespace pagoda::backend::cpu::detail
