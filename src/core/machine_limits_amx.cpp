// AMX helpers of machine_limits.cpp (compiled with the AMX flags; call only where
// amx_hardware_available() / amx_bf16_hardware_available(): the OS has granted the tiles). Each
// iteration is 4 independent tile products (C0..C3 from A0, A1 x B0, B1: the 2 x 2 blocking of the
// kernels), all tiles 16 rows x 64 bytes. The instructions are written as inline asm with fixed
// register numbers, as the kernels do (GCC 12's macros take no template arguments).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace pagoda {
namespace {

struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

void configure_and_load(const void* operands) {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
    const int64_t stride = 64;
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" : : : "memory");
    __asm__ volatile("{tileloadd (%0,%1,1), %%tmm4|tileloadd %%tmm4, [%0+%1*1]}" : : "r"(operands), "r"(stride) : "memory");
    __asm__ volatile("{tileloadd (%0,%1,1), %%tmm5|tileloadd %%tmm5, [%0+%1*1]}" : : "r"(operands), "r"(stride) : "memory");
    __asm__ volatile("{tileloadd (%0,%1,1), %%tmm6|tileloadd %%tmm6, [%0+%1*1]}" : : "r"(operands), "r"(stride) : "memory");
    __asm__ volatile("{tileloadd (%0,%1,1), %%tmm7|tileloadd %%tmm7, [%0+%1*1]}" : : "r"(operands), "r"(stride) : "memory");
}

// The sum of C0's first row: keeps the products observable.
double finish(bool floats) {
    alignas(64) uint8_t c[16][64];
    const int64_t stride = 64;
    __asm__ volatile("{tilestored %%tmm0, (%0,%1,1)|tilestored [%0+%1*1], %%tmm0}" : : "r"(c), "r"(stride) : "memory");
    _tile_release();
    double s = 0;
    for (int i = 0; i < 16; ++i) {
        if (floats) {
            float v;
            std::memcpy(&v, &c[0][4 * i], 4);
            s += v;
        } else {
            int32_t v;
            std::memcpy(&v, &c[0][4 * i], 4);
            s += v;
        }
    }
    return s;
}

}  // namespace

double amx_int8_chain(int64_t iterations) {
    alignas(64) uint8_t operands[1024];
    std::memset(operands, 1, sizeof operands);
    configure_and_load(operands);
    for (int64_t it = 0; it < iterations; ++it)
        __asm__ volatile(
            "tdpbssd %%tmm6, %%tmm4, %%tmm0\n\t"
            "tdpbssd %%tmm7, %%tmm4, %%tmm1\n\t"
            "tdpbssd %%tmm6, %%tmm5, %%tmm2\n\t"
            "tdpbssd %%tmm7, %%tmm5, %%tmm3" ::: "memory");
    return finish(false);
}

double amx_bf16_chain(int64_t iterations) {
    // bf16 pairs (2^-10, 2^-10): products of 2^-20, the sums stay small and finite.
    alignas(64) uint16_t operands[512];
    for (auto& v : operands) v = 0x3a80;
    configure_and_load(operands);
    for (int64_t it = 0; it < iterations; ++it)
        __asm__ volatile(
            "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
            "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
            "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
            "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::: "memory");
    return finish(true);
}

}  // namespace pagoda
