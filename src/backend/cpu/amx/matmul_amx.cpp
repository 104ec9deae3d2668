// When the packed int8 matmul takes the AMX path, and on which trait (contract: matmul_amx.h).
#include "backend/cpu/amx/matmul_amx.h"

#include <atomic>

#include "core/cpu_features.h"

namespace pagoda::backend::cpu {

namespace {
std::atomic<bool> g_amx_emulation{false};
std::atomic<uint64_t> g_amx_dispatch{0};
std::atomic<uint64_t> g_amx_bf16_dispatch{0};
}  // namespace

int64_t amx_min_tokens() {
    const CallPaths p = call_paths();
    return p.amx_min_tokens ? *p.amx_min_tokens : kDefaultAmxMinTokens;
}

void set_amx_emulation(bool on) { g_amx_emulation.store(on); }
bool amx_emulation() { return g_amx_emulation.load(); }

bool amx_path_available() {
    // The tiles stand in for the VNNI panel kernel (its operands, its file): not for the AVX2 one.
    return vnni_panels_active() && packed_int8_path_active() && amx_enabled() && (amx_emulation() || amx_hardware_available());
}

uint64_t amx_dispatch_count() { return g_amx_dispatch.load(std::memory_order_relaxed); }
uint64_t amx_bf16_dispatch_count() { return g_amx_bf16_dispatch.load(std::memory_order_relaxed); }

bool amx_bf16_tiles_run_here() {
    return active_isa() == Isa::avx512 && amx_enabled() && (amx_emulation() || amx_bf16_hardware_available());
}

namespace detail {

bool amx_path_taken(int64_t n_tokens) {
    if (n_tokens < amx_min_tokens() || !amx_enabled()) return false;
    return amx_emulation() || amx_hardware_available();
}

void matmul_packed_amx(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                       const GemmTiles& tiles) {
    g_amx_dispatch.fetch_add(1, std::memory_order_relaxed);
    // The hook wins where both could run: it exists to test the emulated trait.
    if (amx_emulation()) return matmul_packed_amx_emulated(w, acts, n_tokens, y, pool, tiles);
    matmul_packed_amx_hardware(w, acts, n_tokens, y, pool, tiles);
}

void matmul_bf16_tiles(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                       const GemmTiles& tiles) {
    g_amx_bf16_dispatch.fetch_add(1, std::memory_order_relaxed);
    if (amx_emulation()) return matmul_bf16_tiles_emulated(w, x, n_tokens, y, pool, tiles);
    matmul_bf16_tiles_hardware(w, x, n_tokens, y, pool, tiles);
}

}  // namespace detail
}  // namespace pagoda::backend::cpu
