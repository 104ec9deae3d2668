// The fixed grids of ggml's IQ weight types (format data: a file's codes index these, so the values
// must be exactly ggml's). Each grid entry is a group of 8 (IQ2_*, IQ1_*) or 4 (IQ3_*) values:
//   iq2xxs_grid (256), iq2xs_grid (512), iq2s_grid (1024): 8 magnitudes from {8, 25, 43}
//   iq3xxs_grid (256): 4 magnitudes from {4, 12, 20, 28, 36, 44, 52, 62}
//   iq3s_grid (512):   4 magnitudes from {1, 3, 5, ..., 15}
//   iq1s_grid (2048):  8 signed values from {-1, 0, 1}
// Entry i as bytes (value k = byte k) is what ggml's uint64 / uint32 table holds at i.
#pragma once
#include <cstdint>

namespace pagoda::quant {

struct IqGrids {
    uint8_t iq2xxs[256][8];
    uint8_t iq2xs[512][8];
    uint8_t iq2s[1024][8];
    uint8_t iq3xxs[256][4];
    uint8_t iq3s[512][4];
    int8_t iq1s[2048][8];
};

// Built once from the packed tables in iq_grids.cpp.
const IqGrids& iq_grids();

// ggml's ksigns_iq2xs: a 7-bit sign index l expands to 8 sign bits, the eighth chosen so the count
// of negative values is even (l | parity(l) << 7). Bit k set: value k is negative.
inline uint8_t iq_sign_bits(uint32_t l) {
    l &= 127;
    return uint8_t(l | ((__builtin_popcount(l) & 1) << 7));
}

}  // namespace pagoda::quant
