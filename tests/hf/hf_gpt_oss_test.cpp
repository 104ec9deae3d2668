// gpt-oss folders as GGUF gpt-oss: the published config maps to the keys llama.cpp's converter
// (GptOssModel) writes, the MXFP4 repacking gives the values transformers' dequantisation gives
// (FP4 codes, low nibble first, times 2^(scale - 127), written out here), the fused gate_up splits
// even rows to gate and odd rows to up, and what the builder does not compute is refused naming the
// key. The byte-for-byte and bitwise-logits round trips are hf_equivalence_test's cases.
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_gpt_oss.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"
#include "model/model_file.h"
#include "model/random_model.h"
#include "quant/dequantize.h"

namespace pagoda::hf {
namespace {

// gpt-oss-20b's published config.json (layer_types shortened with num_hidden_layers).
constexpr const char* kGptOss20b = R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
    "attention_bias": true, "attention_dropout": 0.0, "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 131072, "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 4,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
    "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
    "rope_type": "yarn", "truncate": false}, "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": false, "use_cache": true, "vocab_size": 201088})";

TEST(HfGptOss, ConfigMapsToTheConvertersKeys) {
    const HfModel m = read_hf_config(kGptOss20b, "config.json");
    EXPECT_EQ(m.arch, "gpt-oss");
    EXPECT_FALSE(m.permute_qk);
    std::map<std::string, gguf::Value> got;
    for (const auto& [key, value] : m.metadata) EXPECT_TRUE(got.emplace(key, value).second) << key << " written twice";
    for (const auto& [key, want] : std::vector<std::pair<std::string, int64_t>>{
             {"block_count", 4}, {"embedding_length", 2880}, {"attention.head_count", 64}, {"attention.head_count_kv", 8},
             {"attention.key_length", 64}, {"rope.dimension_count", 64}, {"expert_count", 32}, {"expert_used_count", 4},
             {"expert_feed_forward_length", 2880}, {"feed_forward_length", 2880}, {"attention.sliding_window", 128},
             {"rope.scaling.original_context_length", 4096}, {"context_length", 131072}}) {
        ASSERT_TRUE(got.count("gpt-oss." + key)) << key;
        EXPECT_EQ(got.at("gpt-oss." + key).as_int(), want) << key;
    }
    EXPECT_EQ(*got.at("gpt-oss.rope.scaling.type").as_string(), "yarn");
    EXPECT_EQ(got.at("gpt-oss.rope.scaling.factor").as_float(), 32.0);
    EXPECT_EQ(got.at("gpt-oss.rope.freq_base").as_float(), 150000.0);
    EXPECT_EQ(got.at("gpt-oss.attention.sliding_window_pattern").to_display(), "[true, false, true, false]");
    const auto t = [&](const char* name) { return gguf_target(m, name).value(); };
    EXPECT_EQ(t("model.layers.1.self_attn.sinks").gguf_name, "blk.1.attn_sinks.weight");
    EXPECT_EQ(t("model.layers.1.mlp.router.bias").gguf_name, "blk.1.ffn_gate_inp.bias");
    EXPECT_EQ(t("model.layers.1.post_attention_layernorm.weight").gguf_name, "blk.1.post_attention_norm.weight");
    EXPECT_EQ(t("model.layers.1.mlp.experts.gate_up_proj_scales").transform, Transform::mxfp4);
    EXPECT_EQ(t("model.layers.1.mlp.experts.down_proj").transform, Transform::experts_io);
    EXPECT_EQ(t("model.layers.1.mlp.experts.gate_up_proj_bias").transform, Transform::gate_up_bias);
}

TEST(HfGptOss, RefusesWhatTheBuilderDoesNotCompute) {
    const nlohmann::json good = nlohmann::json::parse(kGptOss20b);
    for (const auto& [key, value, named] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
             {"swiglu_limit", 10.0, "swiglu_limit"},
             {"quantization_config", {{"quant_method", "fp8"}}, "quantization_config"},
             {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}, "rope_scaling"},
             {"layer_types", {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"}, "layer_types"},
             {"layer_types", {"sliding_attention"}, "layer_types"},
             {"sliding_window", 0, "sliding_window"}}) {
        nlohmann::json j = good;
        j[key] = value;
        std::string e;
        try {
            read_hf_config(j.dump(), "config.json");
        } catch (const Error& err) {
            e = err.what();
        }
        EXPECT_NE(e.find(named), std::string::npos) << key << " = " << value.dump() << ": " << e;
    }
    nlohmann::json j = good;
    j.erase("rope_scaling");
    EXPECT_THROW(read_hf_config(j.dump(), "config.json"), Error);
}

// transformers' dequantisation: byte i of a block holds value 2i (low nibble) and 2i + 1 (high), each
// FP4_VALUES[code] x 2^(scale - 127). ggml's MXFP4 of the repacked block must give the same floats.
TEST(HfGptOss, Mxfp4RepackKeepsTransformersValues) {
    const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    uint8_t hf[16], block[17], back[16];
    for (int i = 0; i < 16; ++i) hf[i] = uint8_t((i * 7 + 3) & 0xFF);
    const uint8_t scale = 127 + 3;
    block[0] = scale;
    mxfp4_hf_to_ggml(hf, block + 1);
    float values[32];
    quant::dequantize_row(gguf::GgmlType::MXFP4, block, values, 32);
    for (int k = 0; k < 32; ++k) {
        const int code = (hf[k / 2] >> (4 * (k % 2))) & 0xF;
        EXPECT_EQ(values[k], fp4[code] * 8.0f) << k;
    }
    mxfp4_ggml_to_hf(block + 1, back);
    EXPECT_EQ(std::memcmp(back, hf, 16), 0);
    // The layout on its own: codes k % 16 in HF order become ggml's j | j << 4.
    uint8_t seq[16], ggml[16];
    for (int i = 0; i < 16; ++i) seq[i] = uint8_t((2 * i) % 16 | ((2 * i + 1) % 16) << 4);
    mxfp4_hf_to_ggml(seq, ggml);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(ggml[j], uint8_t(j | j << 4)) << j;
}

// The folder's layout against the GGUF: gate_up_proj [E, dim, 2 ffn] holds gate in its even and up in
// its odd columns (x @ W), the biases likewise; the MXFP4 form keeps U8 blocks and scales.
TEST(HfGptOss, FolderInterleavesGateAndUp) {
    model::RandomModelSpec s;
    s.arch = "gpt-oss"; s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 32;
    s.vocab_size = 300; s.seed = 3; s.context_length = 256; s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32;
    const std::string dir = test::temp_path("hf-gpt-oss-layout"), path = test::temp_path("hf-gpt-oss-layout.gguf");
    model::write_random_model(s, nullptr, path);
    model::write_random_model_hf(s, dir);
    auto g = gguf::File::open(path);
    auto st = SafetensorsFile::open(dir + "/model.safetensors");
    const SafetensorsTensor* w = st->find("model.layers.1.mlp.experts.gate_up_proj");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{4, 64, 64}));
    const auto* gate = g->find_tensor("blk.1.ffn_gate_exps.weight");
    const auto* up = g->find_tensor("blk.1.ffn_up_exps.weight");
    const auto f32 = [](const uint8_t* p, int64_t i) { float v; std::memcpy(&v, p + 4 * i, 4); return v; };
    for (const auto& [e, r, c] : {std::tuple{0, 0, 0}, std::tuple{2, 5, 17}, std::tuple{3, 31, 63}}) {
        EXPECT_EQ(f32(w->data, (e * 64 + c) * 64 + 2 * r), f32(gate->data, (e * 32 + r) * 64 + c));
        EXPECT_EQ(f32(w->data, (e * 64 + c) * 64 + 2 * r + 1), f32(up->data, (e * 32 + r) * 64 + c));
    }
    const SafetensorsTensor* b = st->find("model.layers.0.mlp.experts.gate_up_proj_bias");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(f32(b->data, 2 * 64 + 2 * 7 + 1), f32(g->find_tensor("blk.0.ffn_up_exps.bias")->data, 2 * 32 + 7));
    const std::string qdir = test::temp_path("hf-gpt-oss-layout-mxfp4");
    s.mxfp4_experts = true;
    model::write_random_model_hf(s, qdir);
    auto qst = SafetensorsFile::open(qdir + "/model.safetensors");
    const SafetensorsTensor* blocks = qst->find("model.layers.0.mlp.experts.gate_up_proj_blocks");
    ASSERT_NE(blocks, nullptr);
    EXPECT_EQ(blocks->type, gguf::GgmlType::I8);
    EXPECT_EQ(blocks->shape, (std::vector<int64_t>{4, 64, 2, 16}));
    EXPECT_EQ(qst->find("model.layers.0.mlp.experts.down_proj_scales")->shape, (std::vector<int64_t>{4, 64, 1}));
}

}  // namespace
}  // namespace pagoda::hf
