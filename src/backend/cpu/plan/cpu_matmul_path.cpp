#include "backend/cpu/plan/cpu_matmul_path.h"

#include <fmt/format.h>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/cpu_features.h"

namespace pagoda::backend::cpu {

std::string describe_matmul_path(const CpuWeight& w, int64_t n_tokens) {
    const auto type = w.parts()[0].type;
    const ScopedKernelChoice scope(kernel_choice(type, n_tokens));
    std::string path;
    const bool packed = !w.packed().empty() && w.packed()[0].is_packed();
    const bool is_float = type == gguf::GgmlType::F32 || type == gguf::GgmlType::F16 || type == gguf::GgmlType::BF16;
    const auto layout = packed ? w.packed()[0].layout() : PackedWeight::Layout::view;
    if (layout == PackedWeight::Layout::bf16_panels && bf16_kernel_available()) path = "bf16 panels, vdpbf16ps";
    else if (layout == PackedWeight::Layout::bf16_tiles && bf16_tiles_available())
        path = amx_emulation() ? "bf16 tiles, AMX (emulated)" : "bf16 tiles, AMX (tdpbf16ps)";
    else if (packed && !is_float && amx_path_available() && n_tokens >= amx_min_tokens())
        path = amx_emulation() ? "packed int8 panels, AMX tiles (emulated)" : "packed int8 panels, AMX tiles (tdpbssd)";
    else if (packed && !is_float && packed_int8_path_active())
        path = vnni_panels_active() ? "packed int8 panels, vpdpbusd" : "packed int8 panels, vpmaddubsw";
    else if (!is_float && quant_method() == QuantMethod::int8_dot) path = "int8 dot";
    else path = "f32 fma";
    return fmt::format("{} {}{}, {} {}", gguf::type_name(uint32_t(type)), path, w.stacked() ? " (stacked)" : "",
                       isa_name(active_isa()), n_tokens == 1 ? "gemv" : "gemm");
}

}  // namespace pagoda::backend::cpu
