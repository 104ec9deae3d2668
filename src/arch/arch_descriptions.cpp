// The table of architectures (arch_description.h): one record each, in the order `supported` lists
// show them. The tensor manifests are in arch_tensors.h.
#include "arch/arch_description.h"

#include <algorithm>

#include "arch/arch_tensors.h"

namespace pagoda::arch {
namespace {

using namespace tensors;

constexpr std::string_view kLlama3[] = {"llama3"}, kLongRope[] = {"longrope"}, kYarn[] = {"yarn"};

constexpr HfClass kLlamaHf[] = {{"LlamaForCausalLM", "llama"},
                                {"MistralForCausalLM", "mistral", HfRole::alias},
                                {"MixtralForCausalLM", "mixtral", HfRole::experts}};
constexpr HfClass kQwen2Hf[] = {{"Qwen2ForCausalLM", "qwen2"}};
constexpr HfClass kQwen3Hf[] = {{"Qwen3ForCausalLM", "qwen3"}};
constexpr HfClass kQwen2MoeHf[] = {{"Qwen2MoeForCausalLM", "qwen2_moe"}};
constexpr HfClass kQwen3MoeHf[] = {{"Qwen3MoeForCausalLM", "qwen3_moe"}};
constexpr HfClass kGemma2Hf[] = {{"Gemma2ForCausalLM", "gemma2"}};
constexpr HfClass kGemma3Hf[] = {{"Gemma3ForCausalLM", "gemma3_text"},
                                 {"Gemma3ForConditionalGeneration", "gemma3", HfRole::multimodal}};
constexpr HfClass kGemma4Hf[] = {{"Gemma4ForCausalLM", "gemma4_text"},
                                 {"Gemma4ForConditionalGeneration", "gemma4", HfRole::multimodal}};
constexpr HfClass kPhi3Hf[] = {{"Phi3ForCausalLM", "phi3"}};
constexpr HfClass kGlm4MoeHf[] = {{"Glm4MoeForCausalLM", "glm4_moe"}};
constexpr HfClass kGlm4Hf[] = {{"Glm4ForCausalLM", "glm4"}};
constexpr HfClass kSmolLM3Hf[] = {{"SmolLM3ForCausalLM", "smollm3"}};
constexpr HfClass kQwen35Hf[] = {{"Qwen3_5ForCausalLM", "qwen3_5_text"},
                                 {"Qwen3_5ForConditionalGeneration", "qwen3_5", HfRole::multimodal}};
constexpr HfClass kQwen35MoeHf[] = {{"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
                                    {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", HfRole::multimodal}};
constexpr HfClass kQwen3NextHf[] = {{"Qwen3NextForCausalLM", "qwen3_next"}};
constexpr HfClass kMiniMaxM2Hf[] = {{"MiniMaxM2ForCausalLM", "minimax_m2"}};
// DeepSeek V3 (Kimi K2 uses its class), V2 and GLM-4.7-Flash: one converter class (hf/hf_deepseek.h).
constexpr HfClass kDeepseek2Hf[] = {{"DeepseekV3ForCausalLM", "deepseek_v3"},
                                    {"DeepseekV2ForCausalLM", "deepseek_v2", HfRole::alias},
                                    {"Glm4MoeLiteForCausalLM", "glm4_moe_lite", HfRole::alias}};
constexpr HfClass kGptOssHf[] = {{"GptOssForCausalLM", "gpt_oss"}};

// The encoders' Hugging Face classes carry converter flags of their own (RoBERTa names, classifier
// heads): they are listed in hf/hf_encoder_config.cpp.
constexpr ArchDescription kArchitectures[] = {
    {.name = "llama", .experts = Has::optional, .rope_scalings = kLlama3, .hf_classes = kLlamaHf,
     .tensors = kDecoderGlobals, .layer_tensors = kLlamaLayer},
    {.name = "qwen2", .rope = Rope::neox, .qkv_bias = Has::yes, .hf_classes = kQwen2Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kQwen2Layer},
    {.name = "qwen3", .rope = Rope::neox, .qk_norm = Has::yes, .hf_classes = kQwen3Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kQwen3Layer},
    // Qwen3-VL's language model: qwen3 with interleaved M-RoPE sections and deep-stack inputs.
    {.name = "qwen3vl", .rope = Rope::neox, .qk_norm = Has::yes, .tensors = kDecoderGlobals,
     .layer_tensors = kQwen3Layer},
    {.name = "qwen2moe", .rope = Rope::neox, .qkv_bias = Has::yes, .experts = Has::yes, .expert_weights_norm = false,
     .hf_classes = kQwen2MoeHf, .tensors = kDecoderGlobals, .layer_tensors = kQwen2MoeLayer},
    {.name = "qwen3moe", .rope = Rope::neox, .qk_norm = Has::yes, .experts = Has::yes, .hf_classes = kQwen3MoeHf,
     .tensors = kDecoderGlobals, .layer_tensors = kQwen3MoeLayer},
    {.name = "gemma2", .rope = Rope::neox, .hf_classes = kGemma2Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kGemma2Layer},
    {.name = "gemma3", .rope = Rope::neox, .qk_norm = Has::yes, .hf_classes = kGemma3Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kGemma3Layer},
    {.name = "gemma4", .rope = Rope::neox, .qk_norm = Has::yes, .experts = Has::optional, .hf_classes = kGemma4Hf,
     .tensors = kGemma4Globals, .layer_tensors = kGemma4Layer},
    {.name = "phi3", .rope = Rope::neox, .rope_scalings = kLongRope, .hf_classes = kPhi3Hf, .tensors = kPhi3Globals,
     .layer_tensors = kPhi3Layer},
    {.name = "gpt-oss", .rope = Rope::neox, .qkv_bias = Has::yes, .o_bias = true, .experts = Has::yes,
     .gating = Gating::softmax_selected, .expert_weights_norm = false, .rope_scalings = kYarn,
     .hf_classes = kGptOssHf, .tensors = kDecoderGlobals, .layer_tensors = kGptOssLayer},
    {.name = "deepseek2", .experts = Has::yes, .expert_weights_norm = false, .rope_scalings = kYarn,
     .hf_classes = kDeepseek2Hf, .tensors = kDecoderGlobals, .layer_tensors = kDeepseek2Layer},
    {.name = "glm4moe", .rope = Rope::neox, .qkv_bias = Has::optional, .qk_norm = Has::optional, .experts = Has::yes,
     .gating = Gating::sigmoid, .expert_weights_norm = false, .hf_classes = kGlm4MoeHf, .tensors = kDecoderGlobals,
     .layer_tensors = kGlm4MoeLayer},
    {.name = "glm4", .qkv_bias = Has::optional, .hf_classes = kGlm4Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kGlm4Layer},
    {.name = "smollm3", .hf_classes = kSmolLM3Hf, .tensors = kDecoderGlobals, .layer_tensors = kLlamaDenseLayer},
    {.name = "mistral3", .rope_scalings = kYarn, .tensors = kDecoderGlobals, .layer_tensors = kLlamaDenseLayer},
    {.name = "qwen35", .rope = Rope::neox, .qk_norm = Has::yes, .hf_classes = kQwen35Hf, .tensors = kDecoderGlobals,
     .layer_tensors = kQwen35Layer},
    {.name = "qwen35moe", .rope = Rope::neox, .qk_norm = Has::yes, .experts = Has::yes, .hf_classes = kQwen35MoeHf,
     .tensors = kDecoderGlobals, .layer_tensors = kQwen35MoeLayer},
    // Qwen3-Next: qwen35moe's layers with fused DeltaNet projections (ssm_in or attn_qkv + attn_gate,
    // ssm_ba) and value heads grouped per key head.
    {.name = "qwen3next", .rope = Rope::neox, .qk_norm = Has::yes, .experts = Has::yes, .hf_classes = kQwen3NextHf,
     .tensors = kDecoderGlobals, .layer_tensors = kQwen3NextLayer},
    {.name = "minimax-m2", .rope = Rope::neox, .qk_norm = Has::yes, .experts = Has::yes, .gating = Gating::sigmoid,
     .hf_classes = kMiniMaxM2Hf, .tensors = kDecoderGlobals, .layer_tensors = kMiniMaxM2Layer},
    {.name = "bert", .kind = Kind::encoder, .qkv_bias = Has::optional, .tensors = kEncoderGlobals,
     .layer_tensors = kEncoderLayer},
    {.name = "nomic-bert", .kind = Kind::encoder, .rope = Rope::neox, .qkv_bias = Has::optional, .tensors = kEncoderGlobals,
     .layer_tensors = kEncoderLayer},
    {.name = "jina-bert-v2", .kind = Kind::encoder, .qkv_bias = Has::optional, .qk_norm = Has::optional,
     .tensors = kEncoderGlobals, .layer_tensors = kJinaBertLayer},
};

// The classifier head (model/classifier_head.h): any architecture's file may carry it.
constexpr std::string_view kHeadTensors[] = {"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"};

const TensorEntry* entry(std::span<const TensorEntry> list, std::string_view name) {
    for (const TensorEntry& t : list)
        if (t.name == name) return &t;
    return nullptr;
}

}  // namespace

const TensorEntry* ArchDescription::layer_tensor(std::string_view n) const { return entry(layer_tensors, n); }

bool ArchDescription::names_tensor(std::string_view n) const {
    if (n.starts_with("blk.")) {
        const size_t dot = n.find('.', 4);
        return dot != std::string_view::npos && dot > 4 && has_layer_tensor(n.substr(dot + 1));
    }
    return entry(tensors, n) || std::find(std::begin(kHeadTensors), std::end(kHeadTensors), n) != std::end(kHeadTensors);
}

bool ArchDescription::allows_rope_scaling(std::string_view type) const {
    return type == "none" || type == "linear" || std::find(rope_scalings.begin(), rope_scalings.end(), type) != rope_scalings.end();
}

std::span<const ArchDescription> architectures() { return kArchitectures; }

const ArchDescription* find_architecture(std::string_view name) {
    for (const ArchDescription& d : kArchitectures)
        if (d.name == name) return &d;
    return nullptr;
}

std::vector<std::string> architecture_names() {
    std::vector<std::string> out;
    for (const ArchDescription& d : kArchitectures) out.emplace_back(d.name);
    return out;
}

const ArchDescription* find_hf_class(std::string_view hf_class, const HfClass** found) {
    for (const ArchDescription& d : kArchitectures)
        for (const HfClass& c : d.hf_classes)
            if (c.name == hf_class) {
                if (found) *found = &c;
                return &d;
            }
    return nullptr;
}

}  // namespace pagoda::arch
