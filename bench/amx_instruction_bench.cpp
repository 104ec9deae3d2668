// What the AMX int8 kernel's parts cost on this core, alone and together (docs/benchmarks.md, the
// AMX host section): tdpbssd with K = 32, with its loads, with zero + store of 4 rotating C tiles, as
// one dependent chain, the per-block f32 epilogue alone, and tiles + epilogue. One thread, AMX hosts only.
//   g++ -O2 -march=native -mamx-tile -mamx-int8 bench/amx_instruction_bench.cpp -o /tmp/amx_instr && /tmp/amx_instr [zeros]
// The operands are pseudo-random, as a model's are: with all-zero operands (`zeros`, what this
// benchmark used before 2026-12-04) the tile sequences ran 1.5-1.6x faster on the same core, so
// zeros flatter the tile unit and overstate what the kernel can reach.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
alignas(64) int8_t A[16][2048];
alignas(64) int8_t B[64][512];
alignas(64) int32_t C[4][16][16];
alignas(64) float D[64][16], SC[64][16];

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The kernel's epilogue for one block of one token tile: convert, scale by sc * d, FMA.
#define EPILOGUE(S, b)                                                                                         \
    {                                                                                                          \
        const __m512 sc = _mm512_load_ps(SC[b]);                                                               \
        _Pragma("GCC unroll 16") for (int m = 0; m < 16; m++) acc[m] = _mm512_fmadd_ps(                        \
            _mm512_cvtepi32_ps(_mm512_load_si512(C[S][m])), _mm512_mul_ps(sc, _mm512_set1_ps(D[b][m])), acc[m]); \
    }
#define PRODUCT(S, A_, B_, b) \
    if (tiles) { _tile_zero(S); _tile_loadd(A_, &A[0][(b) * 32], 2048); _tile_loadd(B_, &B[b][0], 64); _tile_dpbssd(S, A_, B_); }
// A fixed linear congruential sequence: the same operands every run.
void fill_operands() {
    uint32_t s = 1;
    auto next = [&] { return s = s * 1103515245u + 12345u; };
    for (auto& row : A) for (auto& v : row) v = int8_t(next() >> 24);
    for (auto& row : B) for (auto& v : row) v = int8_t(next() >> 24);
    for (auto& row : D) for (auto& v : row) v = float(next() >> 8) * 1e-9f;
    for (auto& row : SC) for (auto& v : row) v = float(next() >> 8) * 1e-9f;
}
}  // namespace

int main(int argc, char** argv) {
    const bool zeros = argc > 1 && std::strcmp(argv[1], "zeros") == 0;
    if (!zeros) fill_operands();
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
        std::fprintf(stderr, "the OS refused the AMX tile permission (or this CPU has no AMX)\n");
        return 1;
    }
    TileConfig cfg;
    for (int t = 0; t < 4; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;      // C
    cfg.rows[4] = cfg.rows[5] = 16, cfg.colsb[4] = cfg.colsb[5] = 32;     // A: 16 tokens x 32 values
    cfg.rows[6] = cfg.rows[7] = 8, cfg.colsb[6] = cfg.colsb[7] = 64;      // B: one block of 16 rows
    _tile_loadconfig(&cfg);
    const int n = 2000000;
    // The operands of the products below (tiles would otherwise hold the zeros LDTILECFG leaves).
    _tile_loadd(4, &A[0][0], 2048); _tile_loadd(5, &A[0][32], 2048); _tile_loadd(6, &B[0][0], 64); _tile_loadd(7, &B[1][0], 64);
    double t0 = seconds();
    for (int i = 0; i < n; i++) {
        _tile_dpbssd(0, 4, 6); _tile_dpbssd(1, 5, 7); _tile_dpbssd(2, 4, 7); _tile_dpbssd(3, 5, 6);
    }
    std::printf("tdpbssd K=32 alone, 4 C tiles:            %.2f ns per product\n", (seconds() - t0) / n / 4 * 1e9);
    t0 = seconds();
    for (int i = 0; i < n / 64; i++)
        for (int b = 0; b < 64; b++) {
            _tile_zero(0); _tile_loadd(4, &A[0][b * 32], 2048); _tile_loadd(6, &B[b][0], 64); _tile_dpbssd(0, 4, 6);
            _tile_stored(0, C[0], 64);
            asm volatile("" ::"r"(C) : "memory");
        }
    std::printf("zero + loads + product + store, a chain: %.2f ns per product\n", (seconds() - t0) / n * 1e9);
    // variant 0: products with zero + store (4 C tiles rotating); 1: + epilogue; 2: products + epilogue
    // without the stores; 3: the epilogue alone; 4: as 1, each epilogue's loads kept after the store
    // that writes their tile, as the kernel must (the intrinsics do not tell the compiler that
    // TILESTORED writes memory, so in 1 it may hoist the loads above the store: no wait on it).
    const char* names[] = {"zero + loads + product + store, rotating", "... + the f32 epilogue",
                           "products + epilogue, no stores", "the f32 epilogue alone",
                           "... + epilogue, loads after their store"};
    float sink = 0;
    for (int variant = 0; variant < 5; variant++) {
        const bool tiles = variant != 3, stores = variant < 2 || variant == 4, epilogue = variant >= 1;
        const bool ordered = variant == 4;
        const int reps = 200000;
        t0 = seconds();
        for (int i = 0; i < reps; i++) {
            __m512 acc[16];
            for (auto& v : acc) v = _mm512_setzero_ps();
            for (int b = 0; b < 64; b += 4) {
#define ORDER if (ordered) asm volatile("" ::"r"(C) : "memory");
                PRODUCT(0, 4, 6, b) if (stores) _tile_stored(1, C[1], 64); ORDER if (epilogue) EPILOGUE(1, b)
                PRODUCT(1, 5, 7, b + 1) if (stores) _tile_stored(2, C[2], 64); ORDER if (epilogue) EPILOGUE(2, b + 1)
                PRODUCT(2, 4, 6, b + 2) if (stores) _tile_stored(3, C[3], 64); ORDER if (epilogue) EPILOGUE(3, b + 2)
                PRODUCT(3, 5, 7, b + 3) if (stores) _tile_stored(0, C[0], 64); ORDER if (epilogue) EPILOGUE(0, b + 3)
#undef ORDER
                asm volatile("" ::"r"(C) : "memory");
            }
            for (auto& v : acc) sink += _mm512_reduce_add_ps(v);
        }
        std::printf("%-41s %.2f ns per 16 tokens x 16 rows x 32 values\n", names[variant], (seconds() - t0) / reps / 64 * 1e9);
    }
    _tile_release();
    return sink == 12345.f;  // keeps the epilogue's results alive
}
