// Internal: the AMX path of the packed int8 matmul (kernel: amx_kernel.h). Both packed entry points
// (matmul_packed_avx512.cpp: from f32 rows and from prequantised rows, the same FusedActs) take it
// for a step of n tokens when amx_path_taken(n): AMX is enabled (PAGODA_AMX), runs here (CPUID,
// XCR0, OS permission) or the emulation hook is on, and n reaches the calling thread's
// amx_min_tokens() (matmul.h). Its results are bitwise the VNNI kernel's.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "backend/cpu/int8/fused_acts.h"
#include "backend/cpu/matmul/matmul.h"

namespace pagoda::backend::cpu::detail {

bool amx_path_taken(int64_t n_tokens);

// The kernel on each trait: the instructions (matmul_amx_hw_amx.cpp; only where
// amx_hardware_available()) and the emulation (matmul_amx_emulated_avx512.cpp; any AVX-512 CPU).
void matmul_packed_amx_hardware(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles);
void matmul_packed_amx_emulated(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles);
// amx_path_taken's choice of trait, counted (amx_dispatch_count).
void matmul_packed_amx(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                       const GemmTiles& tiles);

// The AMX bf16 tile kernel (amx_bf16_kernel.h) for PackedLayout::bf16_tiles weights, on each trait,
// and the choice between them (the emulation hook wins, as above), counted (amx_bf16_dispatch_count).
void matmul_bf16_tiles_hardware(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles);
void matmul_bf16_tiles_emulated(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                                const GemmTiles& tiles);
void matmul_bf16_tiles(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                       const GemmTiles& tiles);

}  // namespace pagoda::backend::cpu::detail
