// Qwen3.5 / 3.6 Hugging Face folders (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM and the
// *ForConditionalGeneration text models) against the GGUF of the same random model: the folder's
// view holds the GGUF's tensors byte for byte and the CPU backend gives bitwise-equal logits. The
// layout facts (value heads grouped per key head in the folder, A_log, the [C, 1, K] conv, norms
// stored as w) are checked against the GGUF directly, not only through the writer's inverse.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf/hf_test_util.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_folder.h"
#include "hf/safetensors.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

RandomModelSpec qwen35_spec(const std::string& arch) {
    RandomModelSpec s;
    s.arch = arch; s.n_layers = 4; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300;
    s.head_dim = 16; s.seed = 11; s.context_length = 256;
    if (arch == "qwen35moe") { s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.shared_expert_ffn_dim = 24; }
    return s;
}

std::vector<std::vector<float>> logits(std::shared_ptr<const gguf::File> file) {
    auto model = open_step_model(file, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
    SequenceRunner runner(*model, false);
    const std::vector<int32_t> prompt = {5, 17, 200, 3, 99, 42, 7};
    std::vector<std::vector<float>> out = {runner.prefill(0, prompt, 64, true)};
    for (int32_t t : {11, 250, 64}) out.push_back(runner.decode(0, t));
    return out;
}

void expect_same_logits(std::shared_ptr<const gguf::File> g, std::shared_ptr<const gguf::File> h, const std::string& label);

void expect_same_model(const gguf::File& g, const std::shared_ptr<const gguf::File>& g_ptr, std::shared_ptr<const gguf::File> h,
                       const std::string& label) {
    for (const auto& t : g.tensors()) {
        const gguf::TensorInfo* v = h->find_tensor(t.name);
        ASSERT_NE(v, nullptr) << label << ": " << t.name;
        EXPECT_EQ(v->type, t.type) << t.name;
        EXPECT_EQ(v->shape, t.shape) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << label << ": " << t.name << " differs";
    }
    EXPECT_EQ(h->tensors().size(), g.tensors().size()) << label;
    expect_same_logits(g_ptr, h, label);
}

void expect_same_logits(std::shared_ptr<const gguf::File> g, std::shared_ptr<const gguf::File> h, const std::string& label) {
    const auto a = logits(g), b = logits(h);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size());
        ASSERT_FALSE(a[i].empty());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4), 0) << label << ": step " << i << " differs";
    }
}

TEST(HfQwen35, FolderGivesTheGgufTensorsAndLogits) {
    std::vector<std::pair<std::string, RandomModelSpec>> cases = {{"qwen35", qwen35_spec("qwen35")},
                                                                  {"qwen35moe", qwen35_spec("qwen35moe")}};
    RandomModelSpec same = qwen35_spec("qwen35");  // as many key heads as value heads: nothing to reorder
    same.n_kv_heads = 6;
    cases.push_back({"qwen35-equal-heads", same});
    RandomModelSpec bf16 = qwen35_spec("qwen35");
    bf16.type = gguf::GgmlType::BF16;
    cases.push_back({"qwen35-bf16", bf16});
    for (const auto& [label, spec] : cases) {
        SCOPED_TRACE(label);
        const std::string gguf_path = pagoda::test::temp_path("hf-q35-" + label + ".gguf"), dir = pagoda::test::temp_path("hf-q35-" + label);
        write_random_model(spec, nullptr, gguf_path);
        write_random_model_hf(spec, dir, label == "qwen35moe" ? 2 : 1);
        auto g = open_model_file(gguf_path);
        expect_same_model(*g, g, open_model_file(dir), label);
    }
}

float f32_at(const uint8_t* p, int64_t i) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
}

// The folder holds what a Qwen3.5 checkpoint holds: value head (key head k, i-th of r) at k*r + i,
// where the GGUF (and the builder) tiles it at i*nk + k; A_log with ssm_a = -exp(A_log); conv1d as
// [channels, 1, kernel]; RMSNorm weights as w for 1 + w, but the DeltaNet's gated norm as is.
TEST(HfQwen35, FolderLayoutIsTheCheckpoints) {
    const RandomModelSpec s = qwen35_spec("qwen35");
    const std::string gguf_path = pagoda::test::temp_path("hf-q35-layout.gguf"), dir = pagoda::test::temp_path("hf-q35-layout");
    write_random_model(s, nullptr, gguf_path);
    write_random_model_hf(s, dir);
    auto g = gguf::File::open(gguf_path);
    auto st = hf::SafetensorsFile::open(dir + "/model.safetensors");
    const int64_t nk = 2, nv = 6, r = 3, hd = 16, key_dim = nk * hd, kernel = 4;
    auto hf_t = [&](const std::string& n) {
        const auto* t = st->find("model.layers.0.linear_attn." + n);
        EXPECT_NE(t, nullptr) << n;
        return t;
    };
    auto gg = [&](const std::string& n) { return g->find_tensor("blk.0." + n); };
    const auto *z = hf_t("in_proj_z.weight"), *qkv = hf_t("in_proj_qkv.weight"), *a_log = hf_t("A_log"), *conv = hf_t("conv1d.weight"),
               *out = hf_t("out_proj.weight"), *dt = hf_t("dt_bias"), *alpha = hf_t("in_proj_a.weight");
    ASSERT_TRUE(z && qkv && a_log && conv && out && dt && alpha);
    EXPECT_EQ(conv->shape, (std::vector<int64_t>{2 * key_dim + nv * hd, 1, kernel}));
    EXPECT_EQ(qkv->shape, (std::vector<int64_t>{2 * key_dim + nv * hd, 48}));
    const uint64_t row = 48 * 4;  // bytes of one row of a [*, hidden] matrix
    for (int64_t k = 0; k < nk; ++k)
        for (int64_t i = 0; i < r; ++i) {
            const int64_t grouped = k * r + i, tiled = i * nk + k;
            SCOPED_TRACE(fmt::format("key head {}, value head {} of it", k, i));
            EXPECT_EQ(std::memcmp(z->data + grouped * hd * row, gg("attn_gate.weight")->data + tiled * hd * row, hd * row), 0);
            EXPECT_EQ(std::memcmp(alpha->data + grouped * row, gg("ssm_alpha.weight")->data + tiled * row, row), 0);
            EXPECT_EQ(std::memcmp(qkv->data + (2 * key_dim + grouped * hd) * row,
                                  gg("attn_qkv.weight")->data + (2 * key_dim + tiled * hd) * row, hd * row), 0);
            EXPECT_EQ(std::memcmp(conv->data + (2 * key_dim + grouped * hd) * kernel * 4,
                                  gg("ssm_conv1d.weight")->data + (2 * key_dim + tiled * hd) * kernel * 4, hd * kernel * 4), 0);
            EXPECT_EQ(f32_at(dt->data, grouped), f32_at(gg("ssm_dt.bias")->data, tiled));
            EXPECT_EQ(-std::exp(f32_at(a_log->data, grouped)), f32_at(gg("ssm_a")->data, tiled));
            for (int64_t o = 0; o < 48; ++o)  // out_proj's columns: each output row reads the value channels
                EXPECT_EQ(f32_at(out->data, o * nv * hd + grouped * hd + 5), f32_at(gg("ssm_out.weight")->data, o * nv * hd + tiled * hd + 5));
        }
    // Q and K rows (the first 2 x key_dim) keep their order.
    EXPECT_EQ(std::memcmp(qkv->data, gg("attn_qkv.weight")->data, 2 * key_dim * row), 0);
    EXPECT_EQ(f32_at(st->find("model.layers.0.input_layernorm.weight")->data, 3) + 1.0f, f32_at(gg("attn_norm.weight")->data, 3));
    EXPECT_EQ(f32_at(st->find("model.layers.3.self_attn.q_norm.weight")->data, 2) + 1.0f, f32_at(g->find_tensor("blk.3.attn_q_norm.weight")->data, 2));
    EXPECT_EQ(f32_at(hf_t("norm.weight")->data, 3), f32_at(gg("ssm_norm.weight")->data, 3));
}

// Qwen3_5ForConditionalGeneration: the decoder's config under text_config, its tensors under
// model.language_model.; the vision tower (model.visual.) and the MTP head (mtp.) are not loaded.
TEST(HfQwen35, ConditionalGenerationFolderLoadsItsTextModel) {
    const RandomModelSpec s = qwen35_spec("qwen35");
    const std::string gguf_path = pagoda::test::temp_path("hf-q35-vl.gguf"), src = pagoda::test::temp_path("hf-q35-vl-src");
    const std::string dir = pagoda::test::temp_path("hf-q35-vl");
    write_random_model(s, nullptr, gguf_path);
    write_random_model_hf(s, src);
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        if (fs::exists(fs::path(src) / f)) fs::copy_file(fs::path(src) / f, fs::path(dir) / f, fs::copy_options::overwrite_existing);
    nlohmann::json text;
    std::ifstream(src + "/config.json") >> text;
    const nlohmann::json config = {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"model_type", "qwen3_5"},
                                   {"text_config", text}, {"vision_config", {{"depth", 1}}},
                                   {"tie_word_embeddings", text["tie_word_embeddings"]}};
    hf::write_text_file(dir + "/config.json", config.dump(2));
    auto st = hf::SafetensorsFile::open(src + "/model.safetensors");
    std::vector<hf::SafetensorsEntry> entries;
    for (const auto& t : st->tensors()) {
        std::string name = t.name;
        if (name.starts_with("model.")) name = "model.language_model." + name.substr(6);
        entries.push_back({name, t.type, t.shape, {t.data, size_t(t.n_bytes)}});
    }
    const std::vector<float> extra(8, 0.5f);
    const std::span<const uint8_t> extra_bytes(reinterpret_cast<const uint8_t*>(extra.data()), 32);
    entries.push_back({"model.visual.blocks.0.attn.qkv.weight", gguf::GgmlType::F32, {2, 4}, extra_bytes});
    entries.push_back({"mtp.fc.weight", gguf::GgmlType::F32, {4, 2}, extra_bytes});
    hf::write_safetensors(dir + "/model.safetensors", entries);
    auto g = open_model_file(gguf_path);
    expect_same_model(*g, g, open_model_file(dir), "conditional-generation");
}

// A folder copied from `src` with its safetensors rewritten by `edit` (name -> entries to write).
void rewrite_folder(const std::string& src, const std::string& dir,
                    const std::function<void(const hf::SafetensorsFile&, std::vector<hf::SafetensorsEntry>&)>& edit) {
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "config.json"})
        if (fs::exists(fs::path(src) / f)) fs::copy_file(fs::path(src) / f, fs::path(dir) / f, fs::copy_options::overwrite_existing);
    auto st = hf::SafetensorsFile::open(src + "/model.safetensors");
    std::vector<hf::SafetensorsEntry> entries;
    edit(*st, entries);
    hf::write_safetensors(dir + "/model.safetensors", entries);
}

// Qwen3.5-MoE checkpoints store each layer's experts fused: mlp.experts.gate_up_proj [E, 2 ffn, dim]
// (gate rows, then up rows) and mlp.experts.down_proj [E, dim, ffn]; they load as the GGUF's
// ffn_gate_up_exps / ffn_down_exps and compute the per-expert folder's logits bit for bit.
TEST(HfQwen35, FusedExpertTensorsLoad) {
    const RandomModelSpec s = qwen35_spec("qwen35moe");
    const std::string gguf_path = pagoda::test::temp_path("hf-q35-fused.gguf"), src = pagoda::test::temp_path("hf-q35-fused-src");
    const std::string dir = pagoda::test::temp_path("hf-q35-fused");
    write_random_model(s, nullptr, gguf_path);
    write_random_model_hf(s, src);
    std::vector<std::vector<uint8_t>> keep;
    keep.reserve(64);
    rewrite_folder(src, dir, [&](const hf::SafetensorsFile& st, std::vector<hf::SafetensorsEntry>& out) {
        for (const auto& t : st.tensors())
            if (t.name.find(".mlp.experts.") == std::string::npos) out.push_back({t.name, t.type, t.shape, {t.data, size_t(t.n_bytes)}});
        for (int l = 0; l < s.n_layers; ++l) {
            const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
            std::vector<uint8_t>& gate_up = keep.emplace_back();
            std::vector<uint8_t>& down = keep.emplace_back();
            for (int e = 0; e < s.n_experts; ++e) {
                for (const char* part : {"gate_proj", "up_proj"}) {
                    const auto* t = st.find(fmt::format("{}{}.{}.weight", p, e, part));
                    ASSERT_NE(t, nullptr);
                    gate_up.insert(gate_up.end(), t->data, t->data + t->n_bytes);
                }
                const auto* d = st.find(fmt::format("{}{}.down_proj.weight", p, e));
                ASSERT_NE(d, nullptr);
                down.insert(down.end(), d->data, d->data + d->n_bytes);
            }
            out.push_back({p + "gate_up_proj", gguf::GgmlType::F32, {s.n_experts, 2 * s.expert_ffn_dim, s.dim}, gate_up});
            out.push_back({p + "down_proj", gguf::GgmlType::F32, {s.n_experts, s.dim, s.expert_ffn_dim}, down});
        }
    });
    auto h = open_model_file(dir);
    ASSERT_NE(h->find_tensor("blk.0.ffn_gate_up_exps.weight"), nullptr);
    EXPECT_EQ(h->find_tensor("blk.0.ffn_gate_up_exps.weight")->shape, (std::vector<int64_t>{s.dim, 2 * s.expert_ffn_dim, s.n_experts}));
    expect_same_logits(open_model_file(gguf_path), h, "fused-experts");

    // Both forms of one tensor in a folder is an error naming the tensor, not a silent pick.
    const std::string mixed = pagoda::test::temp_path("hf-q35-fused-mixed");
    rewrite_folder(src, mixed, [&](const hf::SafetensorsFile& st, std::vector<hf::SafetensorsEntry>& out) {
        for (const auto& t : st.tensors()) out.push_back({t.name, t.type, t.shape, {t.data, size_t(t.n_bytes)}});
        out.push_back({"model.layers.0.mlp.experts.down_proj", gguf::GgmlType::F32, {s.n_experts, s.dim, s.expert_ffn_dim}, keep[1]});
    });
    std::string error;
    try {
        open_model_file(mixed);
    } catch (const Error& e) {
        error = e.what();
    }
    EXPECT_NE(error.find("in two forms (per expert and stacked"), std::string::npos) << error;
}

std::map<std::string, std::string> metadata_of(const hf::HfModel& m) {
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : m.metadata) got[key] = value.to_display();
    return got;
}

const char* kQwen35Text = R"({"architectures": ["Qwen3_5ForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 8,
    "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 17408,
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "attention_bias": false,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 48, "full_attention_interval": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true})";

// A Qwen3.5 text config maps to the keys llama.cpp's converter writes for qwen35.
TEST(HfQwen35, ConfigMapsToTheConvertersKeys) {
    const auto m = hf::read_hf_config(std::string(kQwen35Text) + "}", "config.json");
    EXPECT_EQ(m.arch, "qwen35");
    EXPECT_TRUE(m.norm_plus_one);
    EXPECT_FALSE(m.permute_qk);
    const auto got = metadata_of(m);
    for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
             {"qwen35.ssm.conv_kernel", "4"}, {"qwen35.ssm.state_size", "128"}, {"qwen35.ssm.group_count", "16"},
             {"qwen35.ssm.time_step_rank", "48"}, {"qwen35.ssm.inner_size", "6144"}, {"qwen35.full_attention_interval", "4"},
             {"qwen35.rope.dimension_count", "64"}, {"qwen35.attention.key_length", "256"}, {"qwen35.block_count", "8"},
             {"qwen35.feed_forward_length", "17408"}}) {
        ASSERT_TRUE(got.count(key)) << key;
        EXPECT_EQ(got.at(key), want) << key;
    }
    ASSERT_TRUE(got.count("qwen35.rope.freq_base"));
    EXPECT_EQ(std::stod(got.at("qwen35.rope.freq_base")), 1e7);
    ASSERT_TRUE(got.count("qwen35.rope.dimension_sections"));
    for (const char* n : {"11", "10", "0"}) EXPECT_NE(got.at("qwen35.rope.dimension_sections").find(n), std::string::npos);
}

// What pagoda's qwen35 cannot run is refused naming the key.
TEST(HfQwen35, UnsupportedSettingsAreRefusedByName) {
    const std::string base = kQwen35Text;
    const auto error_of = hf::config_test::config_error;
    auto with = [&](const std::string& key, const std::string& value) {
        nlohmann::json j = nlohmann::json::parse(base + "}");
        j[key] = nlohmann::json::parse(value);
        return j.dump();
    };
    EXPECT_NE(error_of(with("linear_value_head_dim", "64")).find("linear_value_head_dim"), std::string::npos);
    EXPECT_NE(error_of(with("linear_num_value_heads", "40")).find("linear_num_value_heads"), std::string::npos);
    EXPECT_NE(error_of(with("layer_types", R"(["full_attention", "linear_attention", "linear_attention", "full_attention",
        "linear_attention", "linear_attention", "linear_attention", "full_attention"])")).find("layer_types"), std::string::npos);
    nlohmann::json missing = nlohmann::json::parse(base + "}");
    missing.erase("linear_num_key_heads");
    EXPECT_NE(error_of(missing.dump()).find("linear_num_key_heads"), std::string::npos);
    nlohmann::json vl = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}};
    EXPECT_NE(error_of(vl.dump()).find("text_config"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
