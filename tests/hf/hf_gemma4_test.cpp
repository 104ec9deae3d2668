// Gemma 4 folders as GGUF gemma4 (hf_gemma4.h): configs shaped as the published 31B / E2B / 26B-A4B
// ones map to the keys llama.cpp's converter (Gemma4Model) writes, with the converter's rope_freqs
// (written out here from its formula, not from the inverse), norms as stored (Gemma4RMSNorm has no
// +1) and the checkpoint's names; what pagoda would compute differently is refused naming the key; a
// Gemma4ForConditionalGeneration folder (model.language_model. prefix, text_config, towers beside)
// runs as its GGUF bitwise. The plain round trips are hf_equivalence_test's gemma4 cases.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/hf_test_util.h"
#include "hf/safetensors.h"
#include "model/gemma4_test_spec.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::hf {
namespace {

using Json = nlohmann::json;

// The 31B's shape: 12 layers here (5 sliding, 1 full), sliding heads 256 wide with 16 KV heads, full
// ones 512 wide with 4 KV heads and V = K, a quarter of the full heads rotating.
Json text_31b() {
    Json layer_types = Json::array();
    for (int i = 0; i < 12; ++i) layer_types.push_back((i + 1) % 6 ? "sliding_attention" : "full_attention");
    return Json{{"model_type", "gemma4_text"}, {"hidden_size", 5376}, {"num_hidden_layers", 12}, {"intermediate_size", 21504},
                {"num_attention_heads", 32}, {"num_key_value_heads", 16}, {"num_global_key_value_heads", 4},
                {"head_dim", 256}, {"global_head_dim", 512}, {"attention_k_eq_v", true}, {"sliding_window", 1024},
                {"layer_types", layer_types}, {"max_position_embeddings", 262144}, {"rms_norm_eps", 1e-6},
                {"final_logit_softcapping", 30.0}, {"hidden_size_per_layer_input", 0}, {"num_kv_shared_layers", 0},
                {"enable_moe_block", false}, {"num_experts", nullptr}, {"top_k_experts", nullptr},
                {"moe_intermediate_size", nullptr}, {"vocab_size", 262144}, {"hidden_activation", "gelu_pytorch_tanh"},
                {"rope_parameters",
                 {{"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}},
                  {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}}};
}

Json multimodal(const Json& text) {
    return Json{{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"}, {"text_config", text},
                {"vision_config", {{"model_type", "gemma4_vision"}}}, {"tie_word_embeddings", true}};
}

Json causal(Json text) {
    text["architectures"] = {"Gemma4ForCausalLM"};
    return text;
}

// The metadata as displayed (arrays in full), each key once.
std::map<std::string, std::string> metadata_of(const HfModel& m) {
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : config_test::metadata_map(m)) out[key] = value.to_display(64);
    return out;
}

std::string error_of(const Json& config) { return config_test::config_error(config.dump()); }

TEST(HfGemma4, ConditionalGenerationConfigMapsToTheConvertersKeys) {
    const HfModel m = read_hf_config(multimodal(text_31b()).dump(), "config.json");
    EXPECT_EQ(m.arch, "gemma4");
    EXPECT_FALSE(m.norm_plus_one);
    EXPECT_FALSE(m.permute_qk);
    EXPECT_TRUE(m.tied);
    const auto got = metadata_of(m);
    for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
             {"block_count", "12"}, {"embedding_length", "5376"}, {"feed_forward_length", "21504"},
             {"attention.head_count", "32"}, {"attention.head_count_kv", "[16, 16, 16, 16, 16, 4, 16, 16, 16, 16, 16, 4]"},
             {"attention.key_length", "512"}, {"attention.value_length", "512"}, {"attention.key_length_swa", "256"},
             {"attention.value_length_swa", "256"}, {"rope.dimension_count", "512"}, {"rope.dimension_count_swa", "256"},
             {"rope.freq_base", "1000000"}, {"rope.freq_base_swa", "10000"}, {"attention.sliding_window", "1024"},
             {"attention.sliding_window_pattern",
              "[true, true, true, true, true, false, true, true, true, true, true, false]"},
             {"attention.shared_kv_layers", "0"}, {"embedding_length_per_layer_input", "0"},
             {"final_logit_softcapping", "30"}, {"context_length", "262144"}}) {
        ASSERT_TRUE(got.count("gemma4." + key)) << key;
        EXPECT_EQ(got.at("gemma4." + key), want) << key;
    }
    EXPECT_EQ(got.count("gemma4.expert_count"), 0u);
    // The converter's proportional RoPE: int(512 * 0.25 / 2) = 64 rotated frequencies, then 1e30.
    ASSERT_EQ(m.rope_freqs.size(), 256u);
    for (size_t i = 0; i < m.rope_freqs.size(); ++i) EXPECT_EQ(m.rope_freqs[i], i < 64 ? 1.0f : 1e30f) << i;
    // The checkpoint's names under model.language_model.; the towers and the tied head are not loaded.
    const auto t = [&](const char* name) { return gguf_target(m, name).value(); };
    EXPECT_EQ(t("model.language_model.embed_tokens.weight").gguf_name, "token_embd.weight");
    EXPECT_EQ(t("model.language_model.norm.weight").transform, Transform::none);  // no +1: Gemma4RMSNorm is x * w
    EXPECT_EQ(t("model.language_model.layers.5.self_attn.k_proj.weight").gguf_name, "blk.5.attn_k.weight");
    EXPECT_EQ(t("model.language_model.layers.5.input_layernorm.weight").transform, Transform::none);
    EXPECT_EQ(t("model.language_model.layers.0.pre_feedforward_layernorm.weight").gguf_name, "blk.0.ffn_norm.weight");
    EXPECT_EQ(t("model.language_model.layers.0.post_feedforward_layernorm.weight").gguf_name, "blk.0.post_ffw_norm.weight");
    const TensorTarget scalar = t("model.language_model.layers.11.layer_scalar");
    EXPECT_EQ(scalar.gguf_name, "blk.11.layer_output_scale.weight");
    EXPECT_TRUE(scalar.force_f32);
    for (const char* tower : {"model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", "model.embed_vision.embedding_projection.weight",
                              "model.audio_tower.layers.0.attn.q_proj.linear.weight", "lm_head.weight"})
        EXPECT_FALSE(gguf_target(m, tower).has_value()) << tower;
    EXPECT_THROW(gguf_target(m, "model.layers.0.self_attn.q_proj.weight"), Error);  // the text-only prefix
}

// The E2B's shape: per-layer embeddings, the last layers sharing KV with doubled MLPs; the shared
// layers' K/V tensors (which transformers ignores) are not loaded.
TEST(HfGemma4, PerLayerEmbeddingsAndKvSharing) {
    Json text = text_31b();
    text.erase("num_global_key_value_heads");
    text["attention_k_eq_v"] = false;
    text["hidden_size_per_layer_input"] = 256;
    text["vocab_size_per_layer_input"] = 262144;
    text["num_kv_shared_layers"] = 4;
    text["use_double_wide_mlp"] = true;
    text["intermediate_size"] = 6144;
    const HfModel m = read_hf_config(causal(text).dump(), "config.json");
    const auto got = metadata_of(m);
    EXPECT_EQ(got.at("gemma4.attention.head_count_kv"), "16");
    EXPECT_EQ(got.at("gemma4.attention.shared_kv_layers"), "4");
    EXPECT_EQ(got.at("gemma4.embedding_length_per_layer_input"), "256");
    EXPECT_EQ(got.at("gemma4.feed_forward_length"),
              "[6144, 6144, 6144, 6144, 6144, 6144, 6144, 6144, 12288, 12288, 12288, 12288]");
    const auto t = [&](const char* name) { return gguf_target(m, name); };
    EXPECT_EQ(t("model.embed_tokens_per_layer.weight")->gguf_name, "per_layer_token_embd.weight");
    EXPECT_EQ(t("model.per_layer_model_projection.weight")->gguf_name, "per_layer_model_proj.weight");
    EXPECT_TRUE(t("model.per_layer_projection_norm.weight")->force_f32);
    EXPECT_EQ(t("model.layers.3.per_layer_input_gate.weight")->gguf_name, "blk.3.inp_gate.weight");
    EXPECT_EQ(t("model.layers.3.per_layer_projection.weight")->gguf_name, "blk.3.proj.weight");
    EXPECT_EQ(t("model.layers.3.post_per_layer_input_norm.weight")->gguf_name, "blk.3.post_norm.weight");
    EXPECT_EQ(t("model.layers.7.self_attn.k_proj.weight")->gguf_name, "blk.7.attn_k.weight");
    for (const char* dropped : {"model.layers.8.self_attn.k_proj.weight", "model.layers.11.self_attn.v_proj.weight",
                                "model.layers.9.self_attn.k_norm.weight"})
        EXPECT_FALSE(t(dropped).has_value()) << dropped;
    EXPECT_EQ(t("model.layers.8.self_attn.q_proj.weight")->gguf_name, "blk.8.attn_q.weight");
}

// The 26B-A4B's shape: experts beside every layer's MLP, the router's scales as the converter renames them.
TEST(HfGemma4, ExpertsMapToTheConvertersNames) {
    Json text = text_31b();
    text["enable_moe_block"] = true;
    text["num_experts"] = 128;
    text["top_k_experts"] = 8;
    text["moe_intermediate_size"] = 704;
    const HfModel m = read_hf_config(causal(text).dump(), "config.json");
    const auto got = metadata_of(m);
    EXPECT_EQ(got.at("gemma4.expert_count"), "128");
    EXPECT_EQ(got.at("gemma4.expert_used_count"), "8");
    EXPECT_EQ(got.at("gemma4.expert_feed_forward_length"), "704");
    EXPECT_EQ(got.at("gemma4.feed_forward_length"), "21504");  // the dense MLP beside the experts
    const auto t = [&](const char* name) { return gguf_target(m, name).value(); };
    EXPECT_EQ(t("model.layers.2.router.proj.weight").gguf_name, "blk.2.ffn_gate_inp.weight");
    EXPECT_TRUE(t("model.layers.2.router.proj.weight").force_f32);
    EXPECT_EQ(t("model.layers.2.router.scale").gguf_name, "blk.2.ffn_gate_inp.scale");
    EXPECT_EQ(t("model.layers.2.router.per_expert_scale").gguf_name, "blk.2.ffn_down_exps.scale");
    EXPECT_EQ(t("model.layers.2.experts.gate_up_proj").gguf_name, "blk.2.ffn_gate_up_exps.weight");
    EXPECT_EQ(t("model.layers.2.experts.down_proj").gguf_name, "blk.2.ffn_down_exps.weight");
    EXPECT_EQ(t("model.layers.2.pre_feedforward_layernorm_2.weight").gguf_name, "blk.2.pre_ffw_norm_2.weight");
    EXPECT_EQ(t("model.layers.2.post_feedforward_layernorm_1.weight").gguf_name, "blk.2.post_ffw_norm_1.weight");
    EXPECT_EQ(t("model.layers.2.post_feedforward_layernorm_2.weight").gguf_name, "blk.2.post_ffw_norm_2.weight");
}

// A text_config that leaves keys out gets Gemma4TextConfig's defaults (as AutoConfig gives the converter).
TEST(HfGemma4, MissingKeysTakeGemma4TextConfigDefaults) {
    const HfModel m = read_hf_config(
        multimodal({{"hidden_size", 64}, {"num_hidden_layers", 6}, {"intermediate_size", 96}, {"layer_types", nullptr},
                    {"rope_parameters", nullptr}}).dump(),
        "config.json");
    const auto got = metadata_of(m);
    EXPECT_EQ(got.at("gemma4.attention.key_length_swa"), "256");
    EXPECT_EQ(got.at("gemma4.attention.key_length"), "512");
    EXPECT_EQ(got.at("gemma4.attention.head_count_kv"), "4");
    EXPECT_EQ(got.at("gemma4.attention.sliding_window"), "512");
    EXPECT_EQ(got.at("gemma4.embedding_length_per_layer_input"), "256");
    EXPECT_EQ(got.at("gemma4.attention.sliding_window_pattern"), "[true, true, true, true, true, false]");
    EXPECT_EQ(got.count("gemma4.final_logit_softcapping"), 0u);
    EXPECT_EQ(got.at("gemma4.rope.freq_base"), "1000000");
    EXPECT_EQ(got.at("gemma4.rope.freq_base_swa"), "10000");
    // A null global_head_dim leaves the full layers head_dim wide, as transformers' attention reads it.
    Json text = text_31b();
    text["global_head_dim"] = nullptr;
    const auto null_full = metadata_of(read_hf_config(multimodal(text).dump(), "config.json"));
    EXPECT_EQ(null_full.at("gemma4.attention.key_length"), "256");
    EXPECT_EQ(null_full.at("gemma4.rope.dimension_count"), "256");
}

TEST(HfGemma4, RefusesWhatPagodaWouldComputeDifferently) {
    struct Bad {
        std::string key;  // in the error, quoted
        std::function<void(Json&)> edit;
    };
    const std::vector<Bad> bad = {
        {"text_config.rope_parameters.full_attention.rope_type", [](Json& t) { t["rope_parameters"]["full_attention"]["rope_type"] = "default"; }},
        {"text_config.rope_parameters.sliding_attention.rope_type", [](Json& t) { t["rope_parameters"]["sliding_attention"]["rope_type"] = "linear"; }},
        {"text_config.rope_parameters.full_attention.factor", [](Json& t) { t["rope_parameters"]["full_attention"]["factor"] = 2.0; }},
        {"text_config.rope_parameters.sliding_attention.partial_rotary_factor",
         [](Json& t) { t["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5; }},
        {"text_config.rope_parameters.full_attention.partial_rotary_factor",
         [](Json& t) { t["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.001; }},
        {"text_config.partial_rotary_factor", [](Json& t) { t["partial_rotary_factor"] = 0.5; }},
        {"text_config.num_global_key_value_heads", [](Json& t) { t["attention_k_eq_v"] = false; }},
        {"text_config.attention_k_eq_v", [](Json& t) { t.erase("num_global_key_value_heads"); }},
        {"text_config.layer_types", [](Json& t) { t["layer_types"][11] = "sliding_attention"; }},
        {"text_config.layer_types", [](Json& t) { t["layer_types"].erase(0); }},
        {"text_config.layer_types", [](Json& t) { t["layer_types"][0] = "chunked_attention"; }},
        {"text_config.hidden_activation", [](Json& t) { t["hidden_activation"] = "gelu"; }},
        {"text_config.use_bidirectional_attention", [](Json& t) { t["use_bidirectional_attention"] = "all"; }},
        {"text_config.attention_bias", [](Json& t) { t["attention_bias"] = true; }},
        {"text_config.top_k_experts",
         [](Json& t) { t["enable_moe_block"] = true, t["num_experts"] = 4, t["top_k_experts"] = 8, t["moe_intermediate_size"] = 8; }},
        {"text_config.num_experts", [](Json& t) { t["enable_moe_block"] = true; }},
        {"text_config.vocab_size_per_layer_input", [](Json& t) { t["hidden_size_per_layer_input"] = 256, t["vocab_size_per_layer_input"] = 1000; }},
        {"text_config.num_kv_shared_layers", [](Json& t) { t["num_kv_shared_layers"] = 12; }},
        {"text_config.num_kv_shared_layers", [](Json& t) { t["num_kv_shared_layers"] = 7; }},  // layer 5, the only earlier full one, shares
        {"text_config.final_logit_softcapping", [](Json& t) { t["final_logit_softcapping"] = -1.0; }},
        {"text_config.global_head_dim", [](Json& t) { t["global_head_dim"] = 511; }},
        {"text_config.global_head_dim", [](Json& t) { t["global_head_dim"] = 1 << 20; }},  // no 2 GiB rope_freqs
        {"text_config.num_hidden_layers", [](Json& t) { t["num_hidden_layers"] = 1 << 30; }},
    };
    for (const Bad& b : bad) {
        Json text = text_31b();
        b.edit(text);
        const std::string e = error_of(multimodal(text));
        EXPECT_NE(e.find("'" + b.key + "'"), std::string::npos) << b.key << ": " << (e.empty() ? "accepted" : e);
    }
    Json no_text = multimodal(text_31b());
    no_text.erase("text_config");
    EXPECT_NE(error_of(no_text).find("'text_config'"), std::string::npos);
}

// The writer states every form the reader takes back, and refuses naming what config.json cannot say.
TEST(HfGemma4, WriterRefusesWhatConfigCannotSay) {
    const std::string path = pagoda::test::temp_path("hf-gemma4-writer.gguf"), edited = pagoda::test::temp_path("hf-gemma4-writer-edit.gguf");
    model::write_random_model(model::gemma4_test::gemma4_moe_spec(7), nullptr, path);
    const auto with = [&](const std::string& key, std::optional<gguf::Value> v, const std::string& drop_tensor = "") {
        auto in = gguf::File::open(path);
        gguf::Writer w;
        for (const auto& [k, value] : in->metadata()) w.set(k, value);
        if (v) w.set(key, *v);
        for (const auto& t : in->tensors())
            if (t.name != drop_tensor) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        w.write(edited);
        return gguf::File::open(edited);
    };
    const Json good = Json::parse(hf_config_json(*with("", std::nullopt), "float32", {}, {}));
    EXPECT_EQ(good["architectures"][0], "Gemma4ForCausalLM");
    EXPECT_EQ(good["attention_k_eq_v"], true);
    EXPECT_EQ(good["num_global_key_value_heads"], 1);
    EXPECT_EQ(good["rope_parameters"]["full_attention"]["partial_rotary_factor"], 0.25);
    EXPECT_EQ(good["num_experts"], 6);
    EXPECT_EQ(good["moe_intermediate_size"], 48);
    const std::vector<gguf::Value> all_sliding(6, gguf::Value::boolean(true));
    for (const auto& [key, value, drop, why] : std::vector<std::tuple<std::string, std::optional<gguf::Value>, std::string, std::string>>{
             {"gemma4.attention.sliding_window_pattern", gguf::Value::array(gguf::ValueType::boolean, all_sliding), "", "last gemma4 layer slides"},
             {"gemma4.rope.dimension_count_swa", gguf::Value::u32(8), "", "rope_freqs"},
             {"gemma4.attention.value_length", gguf::Value::u32(16), "", "value lengths"},
             {"gemma4.feed_forward_length", gguf::Value::array(gguf::ValueType::u32, std::vector<gguf::Value>(6, gguf::Value::u32(50))), "", ""},
             {"", std::nullopt, "blk.3.ffn_down_exps.scale", "blk.3.ffn_down_exps.scale"},
             {"", std::nullopt, "blk.0.attn_v.weight", "attn_v.weight"}}) {
        try {
            const std::string json = hf_config_json(*with(key, value, drop), "float32", {}, {});
            if (why.empty()) {  // one width for every layer: a plain intermediate_size
                EXPECT_EQ(Json::parse(json)["intermediate_size"], 50);
                continue;
            }
            ADD_FAILURE() << key << drop << " was written";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
    }
    // Different full-layer KV heads without V = K: transformers would not give the full layers theirs.
    const std::string plain = pagoda::test::temp_path("hf-gemma4-writer-plain.gguf");
    model::write_random_model(model::gemma4_test::gemma4_spec(7, 2, false), nullptr, plain);
    try {
        hf_config_json(*gguf::File::open(plain), "float32", {}, {});
        ADD_FAILURE() << "KV heads 2 / 1 without V = K were written";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("attention_k_eq_v"), std::string::npos) << e.what();
    }
}

// The folder's bytes are the GGUF's, checked against the checkpoint's layout rather than the loader:
// norms as stored (no -1), the [1] layer scalar, the experts' [E, 2 ffn, dim] gate_up_proj (each
// expert's gate rows, then its up rows: ggml's fused stack), the router's scales as named.
TEST(HfGemma4, FolderHoldsTheConvertersBytes) {
    const model::RandomModelSpec spec = model::gemma4_test::gemma4_moe_spec(5);
    const std::string path = pagoda::test::temp_path("hf-gemma4-bytes.gguf"), dir = pagoda::test::temp_path("hf-gemma4-bytes");
    model::write_random_model(spec, nullptr, path);
    model::write_random_model_hf(spec, dir);
    auto st = SafetensorsFile::open(dir + "/model.safetensors");
    auto g = gguf::File::open(path);
    for (const auto& [hf, gguf_name, shape] : std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>{
             {"model.layers.1.input_layernorm.weight", "blk.1.attn_norm.weight", {64}},
             {"model.layers.2.self_attn.k_norm.weight", "blk.2.attn_k_norm.weight", {32}},
             {"model.norm.weight", "output_norm.weight", {64}},
             {"model.layers.4.layer_scalar", "blk.4.layer_output_scale.weight", {1}},
             {"model.layers.0.experts.gate_up_proj", "blk.0.ffn_gate_up_exps.weight", {6, 96, 64}},
             {"model.layers.0.experts.down_proj", "blk.0.ffn_down_exps.weight", {6, 64, 48}},
             {"model.layers.3.router.proj.weight", "blk.3.ffn_gate_inp.weight", {6, 64}},
             {"model.layers.3.router.scale", "blk.3.ffn_gate_inp.scale", {64}},
             {"model.layers.3.router.per_expert_scale", "blk.3.ffn_down_exps.scale", {6}}}) {
        const SafetensorsTensor* h = st->find(hf);
        const gguf::TensorInfo* t = g->find_tensor(gguf_name);
        ASSERT_NE(h, nullptr) << hf;
        ASSERT_NE(t, nullptr) << gguf_name;
        EXPECT_EQ(h->shape, shape) << hf;
        ASSERT_EQ(h->n_bytes, t->n_bytes) << hf;
        EXPECT_EQ(std::memcmp(h->data, t->data, t->n_bytes), 0) << hf << " is not " << gguf_name << "'s bytes";
    }
    EXPECT_EQ(st->find("model.layers.2.self_attn.v_proj.weight"), nullptr);  // V = K
    EXPECT_EQ(st->find("model.layers.5.self_attn.k_proj.weight"), nullptr);  // KV sharing
    EXPECT_EQ(st->find("rope_freqs.weight"), nullptr);                       // config.json's rope_parameters
}

std::vector<std::vector<float>> logits(std::shared_ptr<const gguf::File> file) {
    auto model = model::open_step_model(file, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
    model::SequenceRunner runner(*model, false);
    const std::vector<int32_t> prompt = {5, 17, 200, 3, 99, 42, 7};
    std::vector<std::vector<float>> out = {runner.prefill(0, prompt, 64, true)};
    for (int32_t t : {11, 250, 64}) out.push_back(runner.decode(0, t));
    return out;
}

// Gemma4ForConditionalGeneration's folder: the decoder under model.language_model., its config as
// text_config, a vision tower beside it (not loaded) — the same tensors and bitwise the same logits
// as the GGUF of the same seed.
TEST(HfGemma4, ConditionalGenerationFolderRunsAsItsGguf) {
    const model::RandomModelSpec spec = model::gemma4_test::gemma4_ple_spec(11);
    const std::string gguf_path = pagoda::test::temp_path("hf-gemma4-mm.gguf"), plain = pagoda::test::temp_path("hf-gemma4-mm-plain");
    const std::string dir = pagoda::test::temp_path("hf-gemma4-mm");
    model::write_random_model(spec, nullptr, gguf_path);
    model::write_random_model_hf(spec, plain);
    std::filesystem::create_directories(dir);
    {
        auto st = SafetensorsFile::open(plain + "/model.safetensors");
        std::vector<SafetensorsEntry> entries;
        for (const SafetensorsTensor& t : st->tensors()) {
            const std::string name = t.name.starts_with("model.") ? "model.language_model." + t.name.substr(6) : t.name;
            entries.push_back({name, t.type, t.shape, std::span<const uint8_t>(t.data, size_t(t.n_bytes))});
        }
        const std::vector<float> tower = {1, 2, 3, 4};
        entries.push_back({"model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", gguf::GgmlType::F32, {2, 2},
                           std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(tower.data()), 16)});
        write_safetensors(dir + "/model.safetensors", entries, {{"format", "pt"}});
        Json text;
        std::ifstream(plain + "/config.json") >> text;
        text.erase("architectures");
        Json top = multimodal(text);
        top["tie_word_embeddings"] = text["tie_word_embeddings"];
        std::ofstream(dir + "/config.json") << top.dump(2);
    }
    auto g = model::open_model_file(gguf_path);
    auto h = model::open_model_file(dir);
    EXPECT_EQ(h->tensors().size(), g->tensors().size());
    for (const auto& t : g->tensors()) {
        const gguf::TensorInfo* v = h->find_tensor(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name;
    }
    const auto a = logits(g), b = logits(h);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4), 0) << "step " << i;
    }
}

}  // namespace
}  // namespace pagoda::hf
