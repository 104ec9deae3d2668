// The GGUF and the Hugging Face form of the same random model (gen-model, same seed) are the same
// model: the folder's view holds the GGUF's tensors byte for byte (so the Q/K permutation, Gemma's
// +1 norms, expert stacking and the fused Phi-3 tensors are exactly inverted), and the CPU backend
// gives bitwise-equal logits for a prefill and decode steps. Bitwise, not within a tolerance: equal
// tensor bytes and equal metadata values feed the same kernels in the same order, so any difference
// at all is a bug in the mapping.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "model/gemma4_test_spec.h"
#include "gguf/gguf.h"
#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_folder.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

struct Case {
    std::string label;
    RandomModelSpec spec;
};

RandomModelSpec base(const std::string& arch) {
    RandomModelSpec s;
    s.arch = arch; s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300;
    s.head_dim = 16; s.seed = 7; s.context_length = 256;
    return s;
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) out.push_back({arch, base(arch)});
    Case mixtral{"mixtral", base("llama")};
    mixtral.spec.n_experts = 4; mixtral.spec.n_experts_used = 2;
    out.push_back(mixtral);
    for (const char* arch : {"qwen2moe", "qwen3moe"}) {
        Case c{arch, base(arch)};
        c.spec.n_experts = 4; c.spec.n_experts_used = 2; c.spec.expert_ffn_dim = 32;
        out.push_back(c);
    }
    Case llama3{"llama3-rope", base("llama")};
    llama3.spec.rope_scaling = "llama3";
    out.push_back(llama3);
    Case tied{"llama-tied", base("llama")};
    tied.spec.tied_output = true;
    out.push_back(tied);
    Case phi3_window{"phi3-window", base("phi3")};
    phi3_window.spec.sliding_window = 3;
    out.push_back(phi3_window);
    for (const char* arch : {"gemma3", "gemma2", "llama"}) {  // head size from dim / heads, no key_length
        Case c{std::string(arch) + "-implied-head", base(arch)};
        c.spec.head_dim = 0;
        out.push_back(c);
    }
    Case smollm3{"smollm3", base("smollm3")};
    smollm3.spec.n_layers = 4;  // layer 3 without RoPE
    out.push_back(smollm3);
    Case glm4{"glm4", base("glm4")};
    out.push_back(glm4);
    Case glm4moe{"glm4moe", base("glm4moe")};  // GLM-4.5's form: Q/K norms, a dense first layer, shared expert
    glm4moe.spec.n_layers = 3; glm4moe.spec.n_experts = 4; glm4moe.spec.n_experts_used = 2; glm4moe.spec.expert_ffn_dim = 32;
    glm4moe.spec.qk_norm = true; glm4moe.spec.expert_weights_norm = true; glm4moe.spec.expert_weights_scale = 2.5f;
    out.push_back(glm4moe);
    Case glm4moe_air{"glm4moe-air", glm4moe.spec};  // Air's: no Q/K norms
    glm4moe_air.spec.qk_norm = false;
    glm4moe_air.spec.leading_dense = 0;
    out.push_back(glm4moe_air);
    Case minimax{"minimax-m2", base("minimax-m2")};  // whole-row Q/K norms, half of each head rotated, biased router
    minimax.spec.n_experts = 4; minimax.spec.n_experts_used = 2; minimax.spec.expert_ffn_dim = 32;
    out.push_back(minimax);
    // Qwen3-Next: in_proj_qkvz / in_proj_ba are the fused ssm_in / ssm_ba row for row; 3 value heads a
    // key head (grouped), norms as w for 1 + w, A_log for ssm_a.
    Case next{"qwen3next", base("qwen3next")};
    next.spec.n_layers = 4; next.spec.n_experts = 4; next.spec.n_experts_used = 2; next.spec.expert_ffn_dim = 32;
    next.spec.shared_expert_ffn_dim = 40; next.spec.fused_qkvz = true;
    out.push_back(next);
    Case gemma3_period{"gemma3-period", base("gemma3")};
    gemma3_period.spec.swa_period = 2; gemma3_period.spec.sliding_window = 4;
    out.push_back(gemma3_period);
    // DeepSeek V3's form as the converter writes it (kv_b split into attn_k_b / attn_v_b): Q and KV
    // bottlenecks, a dense first layer, a sigmoid router with its bias and groups, scaled and
    // renormalised weights, YaRN.
    Case deepseek{"deepseek-v3", base("deepseek2")};
    deepseek.spec.n_layers = 3; deepseek.spec.n_experts = 4; deepseek.spec.n_experts_used = 2; deepseek.spec.expert_ffn_dim = 32;
    deepseek.spec.mla_split = true; deepseek.spec.expert_gating = 2; deepseek.spec.expert_groups = 2;
    deepseek.spec.expert_groups_used = 1; deepseek.spec.expert_weights_norm = true; deepseek.spec.expert_weights_scale = 2.5f;
    deepseek.spec.yarn = true;
    out.push_back(deepseek);
    Case deepseek_lite{"deepseek-v2-lite", base("deepseek2")};  // a plain q_proj, a softmax router
    deepseek_lite.spec.q_lora_rank = 0; deepseek_lite.spec.n_experts = 4; deepseek_lite.spec.n_experts_used = 2;
    deepseek_lite.spec.expert_ffn_dim = 32; deepseek_lite.spec.mla_split = true;
    out.push_back(deepseek_lite);
    // gpt-oss: biased attention with sinks, alternating sliding layers, YaRN, and the experts' fused,
    // interleaved gate_up_proj, dequantised ([E, in, out]) or as MXFP4 _blocks + _scales.
    Case gpt_oss{"gpt-oss", base("gpt-oss")};
    gpt_oss.spec.n_layers = 3; gpt_oss.spec.n_experts = 4; gpt_oss.spec.n_experts_used = 2; gpt_oss.spec.expert_ffn_dim = 32;
    gpt_oss.spec.sliding_window = 3;
    out.push_back(gpt_oss);
    Case gpt_oss_mxfp4{"gpt-oss-mxfp4", gpt_oss.spec};
    gpt_oss_mxfp4.spec.dim = 64; gpt_oss_mxfp4.spec.mxfp4_experts = true;
    out.push_back(gpt_oss_mxfp4);
    // Gemma 4 (hf_gemma4.h): the 31B's form (V = K on full layers, their own head size and KV heads,
    // KV sharing), the E-models' per-layer embeddings and doubled widths, the 26B-A4B's experts; the
    // folder's config gives back rope_freqs.weight. Uniform: every layer V, one head size and count.
    out.push_back({"gemma4", gemma4_test::gemma4_spec(7)});
    out.push_back({"gemma4-uniform", gemma4_test::gemma4_spec(7, 0, false, true)});
    out.push_back({"gemma4-per-layer", gemma4_test::gemma4_ple_spec(7)});
    out.push_back({"gemma4-experts", gemma4_test::gemma4_moe_spec(7)});
    Case gemma4_tied{"gemma4-tied", gemma4_test::gemma4_spec(7)};  // Gemma 4's own form: lm_head is the embedding
    gemma4_tied.spec.tied_output = true;
    out.push_back(gemma4_tied);
    return out;
}

std::vector<std::vector<float>> logits(std::shared_ptr<const gguf::File> file) {
    auto model = open_step_model(file, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 64});
    SequenceRunner runner(*model, false);
    const std::vector<int32_t> prompt = {5, 17, 200, 3, 99, 42, 7};
    std::vector<std::vector<float>> out = {runner.prefill(0, prompt, 64, true)};
    for (int32_t t : {11, 250, 64}) out.push_back(runner.decode(0, t));
    return out;
}

void expect_same_tensors(const gguf::File& gguf_file, const gguf::File& hf) {
    // The HF form states llama3 scaling as keys (no rope_freqs.weight); gemma4's config.json gives it back.
    const bool freqs_dropped = gguf_file.find_tensor("rope_freqs.weight") && !hf.find_tensor("rope_freqs.weight");
    for (const auto& t : gguf_file.tensors()) {
        if (t.name == "rope_freqs.weight" && freqs_dropped) continue;
        const gguf::TensorInfo* v = hf.find_tensor(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        EXPECT_EQ(v->type, t.type) << t.name;
        EXPECT_EQ(v->shape, t.shape) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name << " differs";
    }
    EXPECT_EQ(hf.tensors().size(), gguf_file.tensors().size() - (freqs_dropped ? 1 : 0));
}

void expect_bitwise(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, const std::string& label) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size()) << label;
        ASSERT_FALSE(a[i].empty());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4), 0) << label << ": step " << i << " differs";
    }
}

TEST(HfEquivalence, EveryArchitectureGivesTheGgufTensorsAndLogits) {
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.label);
        const std::string gguf_path = test::temp_path("hf-eq-" + c.label + ".gguf");
        const std::string dir = test::temp_path("hf-eq-" + c.label);
        write_random_model(c.spec, nullptr, gguf_path);
        write_random_model_hf(c.spec, dir, c.label == "qwen2moe" ? 3 : 1);
        auto g = open_model_file(gguf_path);
        auto h = open_model_file(dir);
        expect_same_tensors(*g, *h);
        expect_bitwise(logits(g), logits(h), c.label);
    }
}

TEST(HfEquivalence, F16AndBf16FoldersLoadAsTheirGguf) {
    for (const auto type : {gguf::GgmlType::F16, gguf::GgmlType::BF16}) {
        for (const char* arch : {"llama", "gemma3", "gemma4"}) {
            RandomModelSpec s = std::string(arch) == "gemma4" ? gemma4_test::gemma4_moe_spec(7) : base(arch);
            s.type = type;
            const std::string label = std::string(arch) + "-" + gguf::type_name(uint32_t(type));
            SCOPED_TRACE(label);
            const std::string gguf_path = test::temp_path("hf-eq-" + label + ".gguf"), dir = test::temp_path("hf-eq-" + label);
            write_random_model(s, nullptr, gguf_path);
            write_random_model_hf(s, dir);
            auto g = open_model_file(gguf_path);
            auto h = open_model_file(dir);
            expect_same_tensors(*g, *h);
            EXPECT_EQ(h->find_tensor("blk.0.attn_q.weight")->type, type);
            EXPECT_EQ(h->find_tensor("blk.0.attn_norm.weight")->type, gguf::GgmlType::F32);
            expect_bitwise(logits(g), logits(h), label);
        }
    }
}

// Zero copy where no transform is needed: a qwen2 folder's matrices are the mapping's own bytes.
TEST(HfEquivalence, UntransformedTensorsAreViewsOfTheMapping) {
    const std::string dir = test::temp_path("hf-zero-copy");
    write_random_model_hf(base("qwen2"), dir);
    auto h = hf::open_hf_folder(dir);
    EXPECT_TRUE(h->is_mapped());  // every tensor is F32 in the file and needs no transform
    auto l = hf::open_hf_folder((write_random_model_hf(base("llama"), test::temp_path("hf-permuted")), test::temp_path("hf-permuted")));
    EXPECT_FALSE(l->is_mapped());  // permuted Q/K live in owned buffers: never report those as a mapping
}

// The layout facts checked against their sources rather than against the inverse written here (a
// mistake made the same way in both directions would pass the round trip above).
// llama.cpp's permute(w, n_head): w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2) — for head size 4
// HF rows [0 1 2 3] become GGUF rows [0 2 1 3].
TEST(HfLayout, QkPermutationIsTheConvertersReshape) {
    std::vector<uint8_t> hf_rows = {0, 1, 2, 3, 4, 5, 6, 7}, gguf_rows(8), back(8);
    hf::permute_rows_to_pairs(hf_rows.data(), gguf_rows.data(), 2, 8, 1);
    EXPECT_EQ(gguf_rows, (std::vector<uint8_t>{0, 2, 1, 3, 4, 6, 5, 7}));
    hf::permute_rows_to_halves(gguf_rows.data(), back.data(), 2, 8, 1);
    EXPECT_EQ(back, hf_rows);
}

float first_f32(const hf::SafetensorsTensor& t) {
    float f;
    std::memcpy(&f, t.data, 4);
    return f;
}

// In the folder, Gemma's norms are stored as w (around 0; the model computes x·(1 + w)), experts
// as one [rows, cols] matrix each: expert e of the GGUF's stacked tensor, bytes equal.
TEST(HfLayout, FolderHoldsGemmaNormsAsWAndExpertsApart) {
    RandomModelSpec g = base("gemma2");
    const std::string gdir = test::temp_path("hf-layout-gemma"), gpath = test::temp_path("hf-layout-gemma.gguf");
    write_random_model(g, nullptr, gpath);
    write_random_model_hf(g, gdir);
    auto st = hf::SafetensorsFile::open(gdir + "/model.safetensors");
    auto gguf_file = gguf::File::open(gpath);
    float stored = 0, gguf_value = 0;
    std::memcpy(&gguf_value, gguf_file->find_tensor("blk.0.post_attention_norm.weight")->data, 4);
    stored = first_f32(*st->find("model.layers.0.post_attention_layernorm.weight"));
    EXPECT_EQ(gguf_value, 8.0f);  // gen-model's post-norm weight, as GGUF stores it (1 + w)
    EXPECT_EQ(stored, 7.0f);

    RandomModelSpec q = base("qwen3moe");
    q.n_experts = 4; q.expert_ffn_dim = 32;
    const std::string qdir = test::temp_path("hf-layout-moe"), qpath = test::temp_path("hf-layout-moe.gguf");
    write_random_model(q, nullptr, qpath);
    write_random_model_hf(q, qdir);
    auto qst = hf::SafetensorsFile::open(qdir + "/model.safetensors");
    auto qg = gguf::File::open(qpath);
    const gguf::TensorInfo* stacked = qg->find_tensor("blk.1.ffn_down_exps.weight");
    ASSERT_NE(stacked, nullptr);
    const auto* e2 = qst->find("model.layers.1.mlp.experts.2.down_proj.weight");
    ASSERT_NE(e2, nullptr);
    EXPECT_EQ(e2->shape, (std::vector<int64_t>{48, 32}));  // [hidden, expert FFN]: down_proj maps FFN -> hidden
    EXPECT_EQ(std::memcmp(e2->data, stacked->data + 2 * e2->n_bytes, e2->n_bytes), 0);
    EXPECT_EQ(qst->find("model.layers.0.mlp.gate.weight")->shape, (std::vector<int64_t>{4, 48}));
}

}  // namespace
}  // namespace pagoda::model

namespace pagoda::model {
namespace {

// SmolLM3's config.json names its NoPE layers: the period-4 list (and full-attention layer_types)
// maps onto smollm3; another list, or a sliding layer, is refused naming the key.
TEST(HfSmollm3, NoRopeLayersMustBeThePeriodLlamaCppComputes) {
    const std::string base_json = R"({"architectures": ["SmolLM3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "rope_theta": 5000000.0, "no_rope_layer_interval": 4, )";
    auto m = hf::read_hf_config(base_json + R"("no_rope_layers": [1, 1, 1, 0],
        "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]})", "config.json");
    EXPECT_EQ(m.arch, "smollm3");
    EXPECT_TRUE(m.permute_qk);
    for (const std::string bad : {R"("no_rope_layers": [1, 0, 1, 1]})", R"("no_rope_layers": [1, 1, 1, 0],
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention"]})"}) {
        std::string error;
        try {
            hf::read_hf_config(base_json + bad, "config.json");
        } catch (const Error& e) {
            error = e.what();
        }
        EXPECT_TRUE(error.find("no_rope_layers") != std::string::npos || error.find("layer_types") != std::string::npos) << error;
        EXPECT_NE(error.find(bad.find("sliding") != std::string::npos ? "names sliding layers" : "every 4th layer"), std::string::npos)
            << error;
    }
}

}  // namespace
}  // namespace pagoda::model

namespace pagoda::model {
namespace {

// GLM-4.5-Air's config.json (the published values) maps to the keys Glm4MoeModel's converter writes.
TEST(HfGlm4moe, AirConfigMapsToTheConvertersKeys) {
    const auto m = hf::read_hf_config(R"({"architectures": ["Glm4MoeForCausalLM"], "attention_bias": true,
        "first_k_dense_replace": 1, "head_dim": 128, "hidden_size": 4096, "intermediate_size": 10944,
        "max_position_embeddings": 131072, "moe_intermediate_size": 1408, "n_routed_experts": 128,
        "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 96, "num_experts_per_tok": 8,
        "num_hidden_layers": 46, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
        "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 1000000,
        "routed_scaling_factor": 1.0, "tie_word_embeddings": false, "use_qk_norm": false})", "config.json");
    EXPECT_EQ(m.arch, "glm4moe");
    EXPECT_FALSE(m.permute_qk);
    EXPECT_EQ(m.nextn_layers, 1);
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : m.metadata) got[key] = value.to_display();
    for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
             {"glm4moe.block_count", "46"}, {"glm4moe.rope.dimension_count", "64"}, {"glm4moe.attention.key_length", "128"},
             {"glm4moe.expert_count", "128"}, {"glm4moe.expert_used_count", "8"}, {"glm4moe.expert_feed_forward_length", "1408"},
             {"glm4moe.expert_shared_count", "1"}, {"glm4moe.leading_dense_block_count", "1"},
             {"glm4moe.expert_gating_func", "2"}, {"glm4moe.expert_weights_norm", "true"}, {"glm4moe.feed_forward_length", "10944"}})
        EXPECT_EQ(got[key], want) << key;
}

// A GLM-4.5 folder's NextN block (num_nextn_predict_layers, at layer index num_hidden_layers) is not
// loaded: a 3-layer folder relabelled as 2 layers + 1 NextN gives the logits of the GGUF cut to 2 blocks.
TEST(HfGlm4moe, NextnLayersInTheFolderAreNotLoaded) {
    RandomModelSpec s = base("glm4moe");
    s.n_layers = 3; s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.qk_norm = true;
    const std::string gguf_path = test::temp_path("hf-glm-nextn.gguf"), cut = test::temp_path("hf-glm-nextn-cut.gguf");
    const std::string dir = test::temp_path("hf-glm-nextn");
    write_random_model(s, nullptr, gguf_path);
    write_random_model_hf(s, dir);
    {
        auto in = gguf::File::open(gguf_path);
        gguf::Writer w;
        for (const auto& [key, value] : in->metadata()) w.set(key, value);
        w.set("glm4moe.block_count", gguf::Value::u32(2));
        for (const auto& t : in->tensors())
            if (t.name.rfind("blk.2.", 0) != 0) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        w.write(cut);
    }
    nlohmann::json config;
    std::ifstream(dir + "/config.json") >> config;
    config["num_hidden_layers"] = 2;
    config["num_nextn_predict_layers"] = 1;
    std::ofstream(dir + "/config.json") << config.dump(2);
    auto h = open_model_file(dir);
    EXPECT_EQ(h->get_int("glm4moe.block_count"), 2);
    EXPECT_EQ(h->find_tensor("blk.2.attn_q.weight"), nullptr);
    expect_bitwise(logits(open_model_file(cut)), logits(h), "glm4moe-nextn");
}

// MiniMax-M2's config.json (the published values) maps to the keys MiniMaxM2Model's converter writes:
// intermediate_size is the expert width, rotary_dim the rotated dims, the sigmoid router gating 2.
constexpr const char* kMiniMaxM2Config = R"({"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
    "attn_type_list": [1, 1, 1], "head_dim": 128, "hidden_size": 3072, "intermediate_size": 1536,
    "max_position_embeddings": 196608, "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 3,
    "num_key_value_heads": 8, "num_local_experts": 256, "qk_norm_type": "per_layer", "rms_norm_eps": 1e-06,
    "rope_theta": 5000000, "rotary_dim": 64, "scoring_func": "sigmoid", "shared_intermediate_size": 0,
    "tie_word_embeddings": false, "use_qk_norm": true, "use_routing_bias": true, "use_mtp": true,
    "vocab_size": 200064})";

TEST(HfMiniMaxM2, ConfigMapsToTheConvertersKeys) {
    const auto m = hf::read_hf_config(kMiniMaxM2Config, "config.json");
    EXPECT_EQ(m.arch, "minimax-m2");
    EXPECT_FALSE(m.permute_qk);
    EXPECT_TRUE(m.mixtral_names);
    EXPECT_EQ(m.n_experts, 256);
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : m.metadata) got[key] = value.to_display();
    for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
             {"minimax-m2.block_count", "3"}, {"minimax-m2.embedding_length", "3072"},
             {"minimax-m2.attention.head_count", "48"}, {"minimax-m2.attention.head_count_kv", "8"},
             {"minimax-m2.attention.key_length", "128"}, {"minimax-m2.rope.dimension_count", "64"},
             {"minimax-m2.rope.freq_base", "5000000"}, {"minimax-m2.expert_count", "256"},
             {"minimax-m2.expert_used_count", "8"}, {"minimax-m2.expert_feed_forward_length", "1536"},
             {"minimax-m2.feed_forward_length", "1536"}, {"minimax-m2.expert_gating_func", "2"},
             {"minimax-m2.context_length", "196608"}})
        EXPECT_EQ(got[key], want) << key;
    EXPECT_EQ(got.count("minimax-m2.expert_weights_norm"), 0u);  // the architecture's default (renormalised)
    // The checkpoint's names, the router's bias among them, and the Q/K norms over whole rows.
    const auto t = [&](const char* name) { return hf::gguf_target(m, name).value().gguf_name; };
    EXPECT_EQ(t("model.layers.2.block_sparse_moe.gate.weight"), "blk.2.ffn_gate_inp.weight");
    EXPECT_EQ(t("model.layers.2.block_sparse_moe.e_score_correction_bias"), "blk.2.exp_probs_b.bias");
    EXPECT_EQ(t("model.layers.0.block_sparse_moe.experts.255.w1.weight"), "blk.0.ffn_gate_exps.weight");
    EXPECT_EQ(t("model.layers.0.block_sparse_moe.experts.7.w3.weight"), "blk.0.ffn_up_exps.weight");
    EXPECT_EQ(t("model.layers.0.block_sparse_moe.experts.0.w2.weight"), "blk.0.ffn_down_exps.weight");
    EXPECT_EQ(t("model.layers.1.self_attn.q_norm.weight"), "blk.1.attn_q_norm.weight");
    EXPECT_EQ(t("model.layers.1.self_attn.k_norm.weight"), "blk.1.attn_k_norm.weight");
    EXPECT_EQ(t("model.layers.1.post_attention_layernorm.weight"), "blk.1.ffn_norm.weight");
    EXPECT_EQ(hf::gguf_target(m, "model.layers.0.block_sparse_moe.experts.7.w3.weight")->expert, 7);
    EXPECT_THROW(hf::gguf_target(m, "model.layers.0.block_sparse_moe.experts.256.w1.weight"), Error);
}

// What the builder does not compute is refused, naming the key.
TEST(HfMiniMaxM2, RefusesWhatTheBuilderDoesNotCompute) {
    const nlohmann::json good = nlohmann::json::parse(kMiniMaxM2Config);
    for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"scoring_func", "relu"}, {"use_routing_bias", false}, {"use_qk_norm", false}, {"qk_norm_type", "per_head"},
             {"shared_intermediate_size", 1024}, {"routed_scaling_factor", 2.5}, {"attn_type_list", {1, 0, 1}},
             {"attn_type_list", {1, 1}}, {"rotary_dim", 256}, {"rotary_dim", 63}}) {
        nlohmann::json j = good;
        j[key] = value;
        try {
            hf::read_hf_config(j.dump(), "config.json");
            ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
        }
    }
    nlohmann::json j = good;
    j.erase("rotary_dim");
    EXPECT_THROW(hf::read_hf_config(j.dump(), "config.json"), Error);
    j = good;
    j["scoring_func"] = "softmax";  // the converter's other router
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : hf::read_hf_config(j.dump(), "config.json").metadata) got[key] = value.to_display();
    EXPECT_EQ(got["minimax-m2.expert_gating_func"], "1");
}

// The writer's inverse: a softmax router round-trips as scoring_func softmax, and the metadata that
// MiniMaxM2Config cannot state is refused naming it rather than dropped.
TEST(HfMiniMaxM2, WriterStatesTheRouterAndRefusesWhatConfigCannotSay) {
    RandomModelSpec s = base("minimax-m2");
    s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32;
    const std::string path = test::temp_path("hf-minimax-writer.gguf"), edited = test::temp_path("hf-minimax-writer-edit.gguf");
    write_random_model(s, nullptr, path);
    const auto with = [&](const std::string& key, gguf::Value v) {
        auto in = gguf::File::open(path);
        gguf::Writer w;
        for (const auto& [k, value] : in->metadata()) w.set(k, value);
        w.set(key, std::move(v));
        for (const auto& t : in->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        w.write(edited);
        return gguf::File::open(edited);
    };
    const auto softmax =
        nlohmann::json::parse(hf::hf_config_json(*with("minimax-m2.expert_gating_func", gguf::Value::u32(1)), "float32", {}, {}));
    EXPECT_EQ(softmax["scoring_func"], "softmax");
    EXPECT_EQ(softmax["rotary_dim"], 8);  // half of the 16-wide heads
    EXPECT_EQ(softmax["intermediate_size"], 32);
    EXPECT_EQ(softmax["num_local_experts"], 4);
    for (const auto& [key, value, why] : std::vector<std::tuple<std::string, gguf::Value, std::string>>{
             {"minimax-m2.expert_gating_func", gguf::Value::u32(3), "expert_gating_func"},
             {"minimax-m2.expert_weights_norm", gguf::Value::boolean(false), "unnormalised"},
             {"minimax-m2.expert_weights_scale", gguf::Value::f32(2.5f), "scaled"},
             {"minimax-m2.expert_feed_forward_length", gguf::Value::u32(16), "expert_feed_forward_length"}}) {
        try {
            hf::hf_config_json(*with(key, value), "float32", {}, {});
            ADD_FAILURE() << key << " was written";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace pagoda::model
