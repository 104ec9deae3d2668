// qwen3vl (Qwen3-VL's language model, llama.cpp's GGUF arch): dense Qwen3 (Q/K head norms, NEOX
// RoPE) with interleaved M-RoPE over the (temporal, height, width) rotary positions of each row
// (qwen3vl_rope.h; model/batch.h's rope_positions), image rows (input_embeddings) and deep-stack:
// an image row's given embedding holds dim x (1 + n_deepstack_layers) values, slice 0 replaces the
// token embedding and slice k is added to the row's hidden state after layer k - 1 (transformers'
// Qwen3VLTextModel adds deepstack_visual_embeds[k - 1] at the visual positions after layer k - 1).
#include "model/arch/qwen3vl_rope.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

std::vector<uint8_t> imrope_pair_axes(const std::vector<int64_t>& sections, int64_t pairs) {
    if (sections.empty() || sections.size() > 4) fail("M-RoPE needs 1 to 4 sections, got {}", sections.size());
    int64_t total = 0;
    for (int64_t s : sections) {
        if (s < 0 || s > 65536) fail("M-RoPE section {} is out of range", s);
        total += s;
    }
    if (total <= 0) fail("M-RoPE sections sum to 0");
    auto section = [&](size_t i) { return i < sections.size() ? sections[i] : 0; };
    std::vector<uint8_t> axes(static_cast<size_t>(pairs), 0);
    for (int64_t p = 0; p < pairs; ++p) {
        const int64_t s = p % total;
        if (s % 3 == 1 && s < 3 * section(1)) axes[size_t(p)] = 1;
        else if (s % 3 == 2 && s < 3 * section(2)) axes[size_t(p)] = 2;
    }
    return axes;
}

BuiltModel build_qwen3vl(const gguf::File& file, const ModelConfig& c, backend::Backend& backend) {
    const std::string key = c.arch + ".rope.dimension_sections";
    if (!file.has(key)) fail("{}: {} is missing (Qwen3-VL's M-RoPE sections)", file.name(), key);
    std::vector<uint8_t> axes;
    try {
        axes = imrope_pair_axes(file.get_ints(key), c.rope_dims / 2);
    } catch (const Error& e) {
        fail("{}: {}: {}", file.name(), key, e.what());
    }
    return build_llama_family(file, c, backend,
                              {.qk_norm = true, .rope_pair_axis = std::move(axes), .image_input = true,
                               .deepstack_layers = int32_t(c.n_deepstack_layers)});
}

}  // namespace pagoda::model
