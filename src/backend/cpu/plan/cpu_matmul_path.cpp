#include "backend/cpu/plan/cpu_matmul_path.h"

#include <fmt/format.h>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/cpu_features.h"

namespace pagoda::backend::cpu {

namespace {

enum class Path { bf16_panels, bf16_tiles, amx_int8, int8_panels, int8_dot, f32_fma };

// The path a matmul of w over n_tokens rows takes; the caller holds the plan's choice in scope.
Path matmul_path(const CpuWeight& w, int64_t n_tokens) {
    const auto type = w.parts()[0].type;
    const bool packed = !w.packed().empty() && w.packed()[0].is_packed();
    const bool is_float = type == gguf::GgmlType::F32 || type == gguf::GgmlType::F16 || type == gguf::GgmlType::BF16;
    const auto layout = packed ? w.packed()[0].layout() : PackedWeight::Layout::view;
    if (layout == PackedWeight::Layout::bf16_panels && bf16_kernel_available()) return Path::bf16_panels;
    if (layout == PackedWeight::Layout::bf16_tiles && bf16_tiles_available()) return Path::bf16_tiles;
    if (packed && !is_float && amx_path_available() && n_tokens >= amx_min_tokens()) return Path::amx_int8;
    if (packed && !is_float && packed_int8_path_active()) return Path::int8_panels;
    if (!is_float && quant_method() == QuantMethod::int8_dot) return Path::int8_dot;
    return Path::f32_fma;
}

}  // namespace

std::string describe_matmul_path(const CpuWeight& w, int64_t n_tokens, const PlanSettings& plan) {
    const auto type = w.parts()[0].type;
    const ScopedKernelChoice scope(kernel_choice(plan, type, n_tokens));
    std::string path;
    switch (matmul_path(w, n_tokens)) {
        case Path::bf16_panels: path = "bf16 panels, vdpbf16ps"; break;
        case Path::bf16_tiles: path = amx_emulation() ? "bf16 tiles, AMX (emulated)" : "bf16 tiles, AMX (tdpbf16ps)"; break;
        case Path::amx_int8:
            path = amx_emulation() ? "packed int8 panels, AMX tiles (emulated)" : "packed int8 panels, AMX tiles (tdpbssd)";
            break;
        case Path::int8_panels:
            path = vnni_panels_active() ? "packed int8 panels, vpdpbusd" : "packed int8 panels, vpmaddubsw";
            break;
        case Path::int8_dot: path = "int8 dot"; break;
        case Path::f32_fma: path = "f32 fma"; break;
    }
    return fmt::format("{} {}{}, {} {}", gguf::type_name(uint32_t(type)), path, w.stacked() ? " (stacked)" : "",
                       isa_name(active_isa()), n_tokens == 1 ? "gemv" : "gemm");
}

MatmulArithmetic matmul_path_arithmetic(const CpuWeight& w, int64_t n_tokens, const PlanSettings& plan) {
    const ScopedKernelChoice scope(kernel_choice(plan, w.parts()[0].type, n_tokens));
    switch (matmul_path(w, n_tokens)) {
        case Path::bf16_panels: return MatmulArithmetic::bf16;
        case Path::bf16_tiles: return MatmulArithmetic::amx_bf16;
        case Path::amx_int8: return MatmulArithmetic::amx_int8;
        case Path::int8_panels:
        case Path::int8_dot: return MatmulArithmetic::int8;
        case Path::f32_fma: return MatmulArithmetic::f32;
    }
    return MatmulArithmetic::f32;
}

}  // namespace pagoda::backend::cpu
