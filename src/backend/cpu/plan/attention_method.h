// The names of the CPU attention methods (attention.h) a kernel plan or profile chooses between.
// Header-only and free of kernels, so a profile can be parsed (and fuzzed) without linking them.
//   simd      the tiled online-softmax walk in f32 on the active ISA (scalar / AVX2 / AVX-512)
//   amx_bf16  queries, keys, probabilities and values rounded to bf16 and multiplied on AMX bf16
//             tiles (TDPBF16PS), the softmax in f32 on AVX-512 (amx_attention.h)
// The two differ in their results (amx_bf16 rounds its operands), so the method is one per
// process, never chosen per step: a token's result must not depend on what shared its step.
#pragma once
#include <optional>
#include <string>

namespace pagoda::backend::cpu {

enum class AttentionMethod { simd, amx_bf16 };
inline constexpr AttentionMethod kAttentionMethods[] = {AttentionMethod::simd, AttentionMethod::amx_bf16};

inline const char* attention_method_name(AttentionMethod m) {
    switch (m) {
        case AttentionMethod::simd: return "simd";
        case AttentionMethod::amx_bf16: return "amx_bf16";
    }
    return "?";
}

inline std::optional<AttentionMethod> parse_attention_method(const std::string& name) {
    for (AttentionMethod m : kAttentionMethods)
        if (name == attention_method_name(m)) return m;
    return std::nullopt;
}

}  // namespace pagoda::backend::cpu
