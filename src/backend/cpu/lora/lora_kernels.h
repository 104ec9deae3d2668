// Internal to lora_add.cpp: the per-ISA row kernels of the LoRA update (AVX2 and AVX-512 both from
// lora_rows_simd.h; same contract on every ISA, different rounding between ISAs, none between calls
// of one). For up to kLoraRowBlock rows at a time:
//   down: h[r][j] = A[j] . x[r]             for j in [j0, j1)   (A: rank x in, `elem` values)
//   up:   y[r][o] += scale * (B[o] . h[r])  for o in [o0, o1)   from B^T (`elem` values in 16-output
//         tiles, backend::lora_bt_index; o0 a multiple of 16) when `bt` is given (a vector FMA over
//         outputs), else from B (out x rank, f32)
// Each value is one dot product in a fixed order that depends on neither the other rows of the block
// nor the ranges, so a row's result is the same however the work is split (batch invariance).
#pragma once
#include <cstdint>

#include "backend/lora_layout.h"

namespace pagoda::backend::cpu {

using backend::kLoraBtTile;
using backend::lora_bt_index;

enum class LoraElem { f32, f16, bf16 };
inline constexpr int kLoraRowBlock = 4;

struct LoraDown {
    LoraElem elem;
    const void* a;  // rank x in
    int64_t in;
    int64_t j0, j1;
    int n_rows;  // 1..kLoraRowBlock
    const float* x[kLoraRowBlock];
    float* h[kLoraRowBlock];  // rank values each
};

struct LoraUp {
    LoraElem elem;    // of bt
    const void* bt;   // rank x out, or null: b
    const float* b;   // out x rank
    int64_t rank, out;
    int64_t o0, o1;
    float scale;
    int n_rows;
    const float* h[kLoraRowBlock];
    float* y[kLoraRowBlock];  // out values each
};

void lora_down_scalar(const LoraDown& d);
void lora_up_scalar(const LoraUp& u);
void lora_down_avx2(const LoraDown& d);
void lora_up_avx2(const LoraUp& u);
void lora_down_avx512(const LoraDown& d);
void lora_up_avx512(const LoraUp& u);

}  // namespace pagoda::backend::cpu
