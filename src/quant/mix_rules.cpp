#include "quant/mix_rules.h"

namespace pagoda::quant {

using gguf::GgmlType;

bool more_bits_layer(int64_t layer, int64_t n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

std::optional<MixChoice> mix_layer_type(const std::string& target, const std::string& role, int64_t layer,
                                        int64_t n_layers) {
    const bool attn_v = role == "attn_v.weight";
    // The experts' and the shared expert's down projections count as ffn_down, as llama-quantize.
    const bool ffn_down = role == "ffn_down.weight" || role == "ffn_down_exps.weight" || role == "ffn_down_shexp.weight";
    if (target == "q4_k_m" || target == "q5_k_m") {
        if ((attn_v || ffn_down) && more_bits_layer(layer, n_layers)) return MixChoice{GgmlType::Q6_K, target + ": more bits"};
        return std::nullopt;
    }
    if (target == "q3_k_m") {
        if (attn_v)
            return layer < 2 ? MixChoice{GgmlType::Q5_K, "q3_k_m: attn_v of layers 0-1"}
                             : MixChoice{GgmlType::Q4_K, "q3_k_m: attn_v"};
        if (ffn_down)
            return layer < n_layers / 16 ? MixChoice{GgmlType::Q5_K, "q3_k_m: ffn_down of the first 16th"}
                                         : MixChoice{GgmlType::Q4_K, "q3_k_m: ffn_down"};
        if (role == "attn_output.weight") return MixChoice{GgmlType::Q4_K, "q3_k_m: attn_output"};
    }
    return std::nullopt;
}

}  // namespace pagoda::quant
