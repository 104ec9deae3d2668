// jina-bert-v2 Hugging Face folders (hf/hf_jina_bert.h): jina-embeddings-v2-base-en's config maps to the
// GGUF keys and names llama.cpp's converter writes; the folder gen-model writes for a random
// `jina-bert-v2` GGUF (-en form) loads back to the GGUF's tensors byte for byte and gives bitwise-equal
// hidden states on the CPU backend; unsupported config values and the -code form are refused by name.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf/hf_test_util.h"
#include "core/error.h"
#include "encoder_hidden_states.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

using encoder_test::hidden_states;
using hf::config_test::error_of;
using hf::config_test::meta;

// jina-embeddings-v2-base-en's config.json (the keys that matter; auto_map and dropouts left out).
const char* kJinaBaseEn = R"({"architectures":["JinaBertForMaskedLM"],"emb_pooler":"mean","feed_forward_type":"geglu",
  "hidden_act":"gelu","hidden_size":768,"intermediate_size":3072,"layer_norm_eps":1e-12,"max_position_embeddings":8192,
  "model_max_length":8192,"model_type":"bert","num_attention_heads":12,"num_hidden_layers":12,"pad_token_id":0,
  "position_embedding_type":"alibi","type_vocab_size":2,"vocab_size":30528})";

std::string with(const std::string& from, const std::string& to) {
    std::string s = kJinaBaseEn;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
}

std::string target(const hf::HfModel& m, const std::string& name) {
    const auto t = hf::gguf_target(m, name);
    return t ? t->gguf_name : "(not loaded)";
}

TEST(HfJinaBert, BaseEnMapsToJinaBertV2KeysAndNames) {
    const hf::HfModel m = hf::read_hf_config(kJinaBaseEn, "config.json");
    EXPECT_EQ(m.arch, "jina-bert-v2");
    EXPECT_TRUE(m.encoder);
    for (const auto& [key, want] : std::vector<std::pair<std::string, int64_t>>{{"jina-bert-v2.context_length", 8192},
                                                                               {"jina-bert-v2.embedding_length", 768},
                                                                               {"jina-bert-v2.feed_forward_length", 3072},
                                                                               {"jina-bert-v2.block_count", 12},
                                                                               {"jina-bert-v2.attention.head_count", 12},
                                                                               {"tokenizer.ggml.token_type_count", 2}}) {
        ASSERT_NE(meta(m, key), nullptr) << key;
        EXPECT_EQ(meta(m, key)->as_int().value_or(-1), want) << key;
    }
    EXPECT_FLOAT_EQ(float(*meta(m, "jina-bert-v2.attention.layer_norm_epsilon")->as_float()), 1e-12f);
    EXPECT_FALSE(std::get<bool>(meta(m, "jina-bert-v2.attention.causal")->data));
    EXPECT_EQ(target(m, "embeddings.word_embeddings.weight"), "token_embd.weight");
    EXPECT_EQ(target(m, "embeddings.token_type_embeddings.weight"), "token_types.weight");
    EXPECT_EQ(target(m, "embeddings.LayerNorm.bias"), "token_embd_norm.bias");
    EXPECT_EQ(target(m, "encoder.layer.11.attention.self.query.bias"), "blk.11.attn_q.bias");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.output.dense.weight"), "blk.0.attn_output.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.output.LayerNorm.weight"), "blk.0.attn_output_norm.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.mlp.gated_layers.weight"), "blk.0.ffn_up.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.mlp.wo.bias"), "blk.0.ffn_down.bias");
    EXPECT_EQ(target(m, "encoder.layer.0.mlp.layernorm.weight"), "blk.0.layer_output_norm.weight");
    EXPECT_EQ(target(m, "bert.encoder.layer.3.mlp.wo.weight"), "blk.3.ffn_down.weight");  // JinaBertForMaskedLM's prefix
    for (const char* dropped : {"embeddings.position_ids", "bert.pooler.dense.weight", "cls.predictions.transform.dense.weight",
                                "cls.predictions.decoder.bias"})
        EXPECT_EQ(target(m, dropped), "(not loaded)") << dropped;
    EXPECT_EQ(hf::hf_source(m, "blk.7.ffn_up.weight").hf_names, std::vector<std::string>{"encoder.layer.7.mlp.gated_layers.weight"});
    for (const char* unknown : {"encoder.layer.12.mlp.wo.weight", "encoder.layers.0.mlp.wo.weight", "encoder.layer.01.mlp.wo.weight",
                                "embeddings.position_embeddings.weight"})
        EXPECT_NE(error_of([&] { hf::gguf_target(m, unknown); }).find("is not a tensor pagoda knows for JinaBertForMaskedLM"),
                  std::string::npos) << unknown;
    // jina-embeddings-v2-base-code's modules: refused by name, not mapped half-way.
    for (const char* code : {"encoder.layer.0.mlp.up_gated_layer.weight", "encoder.layer.0.attention.self.layer_norm_q.weight",
                             "encoder.layer.0.layer_norm_1.weight", "encoder.layer.0.mlp.down_layer.weight"})
        EXPECT_NE(error_of([&] { hf::gguf_target(m, code); }).find("jina-bert-v2-code"), std::string::npos) << code;
    EXPECT_EQ(hf::read_hf_config(with("JinaBertForMaskedLM", "JinaBertModel"), "config.json").arch, "jina-bert-v2");
    // jina-reranker-v1's class: its head has no mapping here yet.
    EXPECT_NE(error_of([&] { hf::read_hf_config(with("JinaBertForMaskedLM", "JinaBertForSequenceClassification"), "config.json"); })
                  .find("'JinaBertForSequenceClassification' is not supported"),
              std::string::npos);
}

TEST(HfJinaBert, RefusesConfigValuesItsBuilderDoesNotCompute) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"\"feed_forward_type\":\"geglu\"", "\"feed_forward_type\":\"reglu\""},
        {"\"feed_forward_type\":\"geglu\"", "\"feed_forward_type\":\"original\""},
        {"\"position_embedding_type\":\"alibi\"", "\"position_embedding_type\":\"absolute\""},
        {"\"hidden_act\":\"gelu\"", "\"hidden_act\":\"relu\""},
        {"\"pad_token_id\":0", "\"pad_token_id\":0,\"is_decoder\":true"},
        {"\"hidden_size\":768", "\"hidden_size\":770"},
        {"\"layer_norm_eps\":1e-12", "\"layer_norm_eps\":2"},
        {"\"intermediate_size\":3072,", ""},
    };
    for (const auto& [from, to] : cases) {
        std::string key = (to.find("is_decoder") != std::string::npos ? to.substr(to.find("is_decoder")) : from.substr(1));
        key = key.substr(0, key.find('"'));
        const std::string err = error_of([&] { hf::read_hf_config(with(from, to), "config.json"); });
        EXPECT_NE(err.find("'" + key + "'"), std::string::npos) << to << ": " << err;
    }
    EXPECT_NE(error_of([&] { hf::read_hf_config(with("\"feed_forward_type\":\"geglu\"", "\"feed_forward_type\":\"reglu\""),
                                                "config.json"); })
                  .find("reglu"),
              std::string::npos);
}

RandomModelSpec jina_spec() {
    RandomModelSpec s;
    s.arch = "jina-bert-v2";
    s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.ffn_dim = 72; s.vocab_size = 300; s.context_length = 40; s.seed = 13;
    return s;
}

TEST(HfJinaBert, FolderGivesTheGgufTensorsAndHiddenStates) {
    const RandomModelSpec spec = jina_spec();
    const std::string path = pagoda::test::temp_path("hf-jina.gguf"), dir = pagoda::test::temp_path("hf-jina");
    std::filesystem::remove_all(dir);
    write_random_model(spec, nullptr, path);
    write_random_model_hf(spec, dir);
    const auto g = open_model_file(path), h = open_model_file(dir);

    std::ifstream in(dir + "/config.json");
    const nlohmann::json config = nlohmann::json::parse(in);
    EXPECT_EQ(config["architectures"][0], "JinaBertModel");
    EXPECT_EQ(config["position_embedding_type"], "alibi");
    EXPECT_EQ(config["feed_forward_type"], "geglu");
    EXPECT_EQ(config["max_position_embeddings"], 40);
    EXPECT_EQ(h->get_string("general.architecture"), "jina-bert-v2");
    for (const auto& t : g->tensors()) {
        const gguf::TensorInfo* v = h->find_tensor(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        EXPECT_EQ(v->type, t.type) << t.name;
        EXPECT_EQ(v->shape, t.shape) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name << " differs";
    }
    EXPECT_EQ(h->tensors().size(), g->tensors().size());
    for (const char* key : {"context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                            "pooling_type"})
        EXPECT_EQ(h->get_int_or(std::string("jina-bert-v2.") + key, -1), g->get_int_or(std::string("jina-bert-v2.") + key, -1))
            << key;
    EXPECT_EQ(h->get_float("jina-bert-v2.attention.layer_norm_epsilon"), g->get_float("jina-bert-v2.attention.layer_norm_epsilon"));
    EXPECT_EQ(h->get_strings("tokenizer.ggml.tokens"), g->get_strings("tokenizer.ggml.tokens"));
    // The fused GEGLU matrix under jina's own name: 2 x FFN rows, the gate's first, byte for byte.
    auto st = hf::SafetensorsFile::open(dir + "/model.safetensors");
    const hf::SafetensorsTensor* gated = st->find("encoder.layer.1.mlp.gated_layers.weight");
    ASSERT_NE(gated, nullptr);
    EXPECT_EQ(gated->shape, (std::vector<int64_t>{2 * 72, 48}));
    for (const char* name : {"embeddings.LayerNorm.weight", "encoder.layer.0.mlp.wo.bias", "encoder.layer.0.mlp.layernorm.weight"})
        EXPECT_NE(st->find(name), nullptr) << name;
    EXPECT_EQ(st->find("embeddings.position_embeddings.weight"), nullptr);  // ALiBi: no position table

    ASSERT_NO_FATAL_FAILURE(encoder_test::expect_same_hidden_states(g, h, 48));
}

// The -code form (separate ffn_gate, Q/K norms) and the reranker head have no HF form here yet.
TEST(HfJinaBert, CodeFormAndRerankerAreRefusedWhenWriting) {
    RandomModelSpec code = jina_spec();
    code.qk_norm = true;
    EXPECT_NE(error_of([&] { write_random_model_hf(code, pagoda::test::temp_path("hf-jina-code")); }).find("jina-bert-v2-code"),
              std::string::npos);
    RandomModelSpec rank = jina_spec();
    rank.rank_head = "dense";
    EXPECT_NE(error_of([&] { write_random_model_hf(rank, pagoda::test::temp_path("hf-jina-rank")); }).find("for bert only"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
