// The emulated AMX tiles (amx_tiles.h) against the instructions' definitions written out here: TDPBSUD
// sums signed A bytes times unsigned B bytes per 4-byte group into int32 (wrapping), loads zero what
// and stores move the configured shape only, and what the hardware would fault on is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/amx/amx_tiles.h"
#include "core/error.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Released {
    ~Released() { amx_emu_release(); }
};

AmxConfig shapes(int m, int k_bytes, int n) {
    AmxConfig c;
    c.rows[0] = uint8_t(m), c.colsb[0] = uint16_t(4 * n);      // C
    c.rows[1] = uint8_t(m), c.colsb[1] = uint16_t(k_bytes);    // A
    c.rows[2] = uint8_t(k_bytes / 4), c.colsb[2] = uint16_t(4 * n);  // B
    return c;
}

// Random A, B and C of several shapes through TDPBSUD (SignedB false: B unsigned) or TDPBSSD (the
// int8 kernel's product, B signed), against the exact sums; A is signed in both.
template <bool SignedB>
void check_int8_products(uint32_t seed) {
    Released released;
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto [m, k_bytes, n] : {std::tuple{16, 64, 16}, {5, 32, 8}, {1, 4, 1}, {16, 16, 16}, {9, 12, 3}}) {
        AmxEmulated::load_config(shapes(m, k_bytes, n));
        uint8_t a[16][64], b[16][64];
        int32_t c0[16][16], c[16][16];
        for (auto& row : a) for (auto& v : row) v = uint8_t(byte(rng));
        for (auto& row : b) for (auto& v : row) v = uint8_t(byte(rng));
        for (auto& row : c0) for (auto& v : row) v = int32_t(byte(rng)) * 1000 - 128000;
        AmxEmulated::load<0>(c0, 64);
        AmxEmulated::load<1>(a, 64);
        AmxEmulated::load<2>(b, 64);
        if constexpr (SignedB) AmxEmulated::dpbssd<0, 1, 2>();
        else AmxEmulated::dpbsud<0, 1, 2>();
        std::memset(c, 0x55, sizeof c);
        AmxEmulated::store<0>(c, 64);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                int64_t want = c0[i][j];
                for (int kk = 0; kk < k_bytes; ++kk) {
                    const uint8_t bv = b[kk / 4][4 * j + kk % 4];
                    want += int64_t(int8_t(a[i][kk])) * (SignedB ? int64_t(int8_t(bv)) : int64_t(bv));
                }
                ASSERT_EQ(c[i][j], int32_t(want)) << m << "x" << k_bytes << "x" << n << " at " << i << "," << j;
            }
        // The store writes the configured shape only.
        EXPECT_EQ(c[0][n < 16 ? n : 0] == 0x55555555, n < 16);
    }
}

TEST(AmxEmulation, DpbsudIsSignedTimesUnsignedPerFourByteGroup) { check_int8_products<false>(41); }

TEST(AmxEmulation, DpbssdIsSignedTimesSignedPerFourByteGroup) { check_int8_products<true>(43); }

TEST(AmxEmulation, SumsWrapAndTheShapeBoundsLoadsAndStores) {
    Released released;
    AmxConfig cfg = shapes(2, 4, 1);
    AmxEmulated::load_config(cfg);
    int32_t big[2][16] = {{INT32_MAX}, {INT32_MIN}};
    const uint8_t a[2][64] = {{1, 1, 1, 1}, {0xff, 0xff, 0xff, 0xff}};  // A: +1s, then -1s
    const uint8_t b[1][64] = {{255, 255, 255, 255}};
    AmxEmulated::load<0>(big, 64);
    AmxEmulated::load<1>(a, 64);
    AmxEmulated::load<2>(b, 64);
    AmxEmulated::dpbsud<0, 1, 2>();
    int32_t out[2][16];
    AmxEmulated::store<0>(out, 64);
    EXPECT_EQ(out[0][0], int32_t(uint32_t(INT32_MAX) + 1020u));   // wraps past INT32_MAX
    EXPECT_EQ(out[1][0], int32_t(uint32_t(INT32_MIN) - 1020u));   // and below INT32_MIN
    // A 1 x 4-byte tile loads and stores just that.
    const uint8_t ones[2][64] = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 9, 9, 9, 9}};
    cfg.colsb[4] = 4, cfg.rows[4] = 1;
    AmxEmulated::load_config(cfg);
    AmxEmulated::load<4>(ones, 64);
    uint8_t back[1][64];
    std::memset(back, 7, sizeof back);
    AmxEmulated::store<4>(back, 64);
    EXPECT_EQ(back[0][3], 4);
    EXPECT_EQ(back[0][4], 7) << "a 4-byte tile stores 4 bytes";
    AmxEmulated::load<0>(big, 64);
    AmxEmulated::zero<0>();
    AmxEmulated::store<0>(out, 64);
    EXPECT_EQ(out[0][0], 0);
    EXPECT_EQ(out[1][0], 0);
}

TEST(AmxEmulation, WhatTheHardwareFaultsOnIsRefused) {
    Released released;
    amx_emu_release();
    int32_t buf[16][16] = {};
    EXPECT_THROW(AmxEmulated::load<0>(buf, 64), Error) << "no configuration";
    AmxConfig cfg = shapes(16, 32, 16);
    AmxEmulated::load_config(cfg);
    EXPECT_THROW(AmxEmulated::load<5>(buf, 64), Error) << "tile 5 is not configured";
    AmxEmulated::load<0>(buf, 64);
    // Shapes that do not agree: A's K against B's rows, A's rows against C's, B's width against C's.
    AmxConfig k_mismatch = cfg;
    k_mismatch.rows[2] = 4;
    AmxEmulated::load_config(k_mismatch);
    EXPECT_THROW((AmxEmulated::dpbsud<0, 1, 2>()), Error);
    AmxConfig m_mismatch = cfg;
    m_mismatch.rows[1] = 8;
    AmxEmulated::load_config(m_mismatch);
    EXPECT_THROW((AmxEmulated::dpbsud<0, 1, 2>()), Error);
    AmxConfig n_mismatch = cfg;
    n_mismatch.colsb[2] = 32;
    AmxEmulated::load_config(n_mismatch);
    EXPECT_THROW((AmxEmulated::dpbsud<0, 1, 2>()), Error);
    AmxEmulated::load_config(cfg);
    EXPECT_THROW((AmxEmulated::dpbsud<0, 0, 2>()), Error) << "C and A the same tile";
    AmxConfig too_big = cfg;
    too_big.colsb[0] = 128;
    EXPECT_THROW(AmxEmulated::load_config(too_big), Error);
    too_big = cfg;
    too_big.rows[0] = 17;
    EXPECT_THROW(AmxEmulated::load_config(too_big), Error);
    AmxConfig palette2 = cfg;
    palette2.palette = 2;
    EXPECT_THROW(AmxEmulated::load_config(palette2), Error);
    AmxConfig tile9 = cfg;
    tile9.rows[9] = 1, tile9.colsb[9] = 4;
    EXPECT_THROW(AmxEmulated::load_config(tile9), Error);
    AmxEmulated::release();
    EXPECT_THROW(AmxEmulated::zero<0>(), Error) << "released";
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
