// The names of the CPU matmul methods a kernel plan (kernel_plan.h) chooses between, and which weight
// types each can multiply. Header-only and free of kernels, so a profile can be parsed (and fuzzed)
// without linking them. New paths that change results become new enumerators here (AMX int8 tiles
// do not: they are bitwise the int8_dot panels', a threshold of the plan, see kernel_plan.h; AMX bf16
// tiles do: amx_bf16 sums in another order than bf16_dot, see matmul.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "gguf/ggml_types.h"
#include "quant/dequantize.h"

namespace pagoda::backend::cpu {

enum class PathMethod { f32_fma, bf16_dot, int8_dot, dequant_fma, amx_bf16 };
inline constexpr PathMethod kPathMethods[] = {PathMethod::f32_fma, PathMethod::bf16_dot, PathMethod::int8_dot,
                                              PathMethod::dequant_fma, PathMethod::amx_bf16};

inline const char* path_method_name(PathMethod m) {
    switch (m) {
        case PathMethod::f32_fma: return "f32_fma";
        case PathMethod::bf16_dot: return "bf16_dot";
        case PathMethod::int8_dot: return "int8_dot";
        case PathMethod::dequant_fma: return "dequant_fma";
        case PathMethod::amx_bf16: return "amx_bf16";
    }
    return "?";
}

// "1", "2-8" or "65+": the token range from `lo` to `max_tokens` (INT64_MAX: no upper end). Shared by
// the plan's log line and the profile's description, so both name a range the same way.
inline std::string token_range_label(int64_t lo, int64_t max_tokens) {
    if (max_tokens == INT64_MAX) return std::to_string(lo) + "+";
    if (max_tokens == lo) return std::to_string(lo);
    return std::to_string(lo) + "-" + std::to_string(max_tokens);
}

inline std::optional<PathMethod> parse_path_method(const std::string& name) {
    for (PathMethod m : kPathMethods)
        if (name == path_method_name(m)) return m;
    return std::nullopt;
}

inline bool is_float_weight(gguf::GgmlType t) {
    return t == gguf::GgmlType::F32 || t == gguf::GgmlType::F16 || t == gguf::GgmlType::BF16;
}

// A type the CPU matmul multiplies (matmul_supports) and a method that applies to it: float methods
// for F32/F16/BF16 (bf16_dot and amx_bf16 not for F32, which has no bf16 panels), quantised methods for
// block types.
inline bool method_applies(PathMethod m, gguf::GgmlType type) {
    if (is_float_weight(type))
        return m == PathMethod::f32_fma ||
               ((m == PathMethod::bf16_dot || m == PathMethod::amx_bf16) && type != gguf::GgmlType::F32);
    if (!quant::is_supported_block_type(type)) return false;
    return m == PathMethod::int8_dot || m == PathMethod::dequant_fma;
}

// Where an AMX threshold (kernel_plan.h) means something: int8_dot on the types with packed int8
// panels (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4), which have the AMX tile
// kernel (and the wide prefill kernel, whose threshold pagoda tune measures for the same types).
inline bool amx_applies(PathMethod m, gguf::GgmlType type) {
    using gguf::GgmlType;
    return m == PathMethod::int8_dot && (type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 || type == GgmlType::Q8_0 ||
                                         type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K ||
                                         type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS || type == GgmlType::MXFP4);
}

}  // namespace pagoda::backend::cpu
