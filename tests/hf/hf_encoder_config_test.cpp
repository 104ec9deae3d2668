// Encoder config.json -> GGUF `bert` metadata and tensor names for real-world shapes (bge-small-en-v1.5's
// BertModel, bge-reranker-v2-m3's XLMRobertaForSequenceClassification), checked against what
// llama.cpp's converter writes for them; sentence-transformers' pooling files; refusals name the key.
#include <gtest/gtest.h>

#include "hf/hf_test_util.h"
#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf {
namespace {

using config_test::config_error;
using config_test::error_of;
using config_test::meta;
using config_test::meta_int;

const char* kBgeSmall = R"({"architectures":["BertModel"],"attention_probs_dropout_prob":0.1,"classifier_dropout":null,
  "hidden_act":"gelu","hidden_size":384,"id2label":{"0":"LABEL_0"},"intermediate_size":1536,"label2id":{"LABEL_0":0},
  "layer_norm_eps":1e-12,"max_position_embeddings":512,"model_type":"bert","num_attention_heads":12,"num_hidden_layers":12,
  "pad_token_id":0,"position_embedding_type":"absolute","type_vocab_size":2,"vocab_size":30522})";

const char* kBgeReranker = R"({"architectures":["XLMRobertaForSequenceClassification"],"hidden_act":"gelu","hidden_size":1024,
  "id2label":{"0":"LABEL_0"},"intermediate_size":4096,"label2id":{"LABEL_0":0},"layer_norm_eps":1e-05,
  "max_position_embeddings":8194,"model_type":"xlm-roberta","num_attention_heads":16,"num_hidden_layers":24,"pad_token_id":1,
  "position_embedding_type":"absolute","type_vocab_size":1,"vocab_size":250002})";

// nomic-embed-text-v1.5's config.json (the keys that matter; auto_map and dropouts left out).
const char* kNomicV15 = R"({"activation_function":"swiglu","architectures":["NomicBertModel"],"causal":false,
  "layer_norm_epsilon":1e-12,"max_trained_positions":2048,"mlp_fc1_bias":false,"mlp_fc2_bias":false,"model_type":"nomic_bert",
  "n_embd":768,"n_head":12,"n_inner":3072,"n_layer":12,"n_positions":8192,"prenorm":false,"qkv_proj_bias":false,
  "rotary_emb_base":1000,"rotary_emb_fraction":1.0,"rotary_emb_interleaved":false,"rotary_emb_scale_base":null,
  "rotary_scaling_factor":null,"type_vocab_size":2,"use_rms_norm":false,"parallel_block":false,"vocab_size":30528})";

std::string target(const HfModel& m, const std::string& name) {
    const auto t = gguf_target(m, name);
    return t ? t->gguf_name : "(not loaded)";
}

TEST(HfEncoderConfig, BgeSmallMapsToBertKeysAndNames) {
    const HfModel m = read_hf_config(kBgeSmall, "config.json");
    EXPECT_EQ(m.arch, "bert");
    EXPECT_TRUE(m.encoder);
    EXPECT_EQ(meta_int(m, "bert.context_length"), 512);
    EXPECT_EQ(meta_int(m, "bert.embedding_length"), 384);
    EXPECT_EQ(meta_int(m, "bert.feed_forward_length"), 1536);
    EXPECT_EQ(meta_int(m, "bert.block_count"), 12);
    EXPECT_EQ(meta_int(m, "bert.attention.head_count"), 12);
    EXPECT_EQ(meta_int(m, "tokenizer.ggml.token_type_count"), 2);
    EXPECT_FLOAT_EQ(float(*meta(m, "bert.attention.layer_norm_epsilon")->as_float()), 1e-12f);
    EXPECT_FALSE(std::get<bool>(meta(m, "bert.attention.causal")->data));
    EXPECT_EQ(meta(m, "bert.pooling_type"), nullptr);  // from modules.json only
    EXPECT_EQ(target(m, "embeddings.word_embeddings.weight"), "token_embd.weight");
    EXPECT_EQ(target(m, "embeddings.position_embeddings.weight"), "position_embd.weight");
    EXPECT_EQ(gguf_target(m, "embeddings.position_embeddings.weight")->skip_rows, 0);
    EXPECT_EQ(target(m, "embeddings.token_type_embeddings.weight"), "token_types.weight");
    EXPECT_EQ(target(m, "embeddings.LayerNorm.bias"), "token_embd_norm.bias");
    EXPECT_EQ(target(m, "encoder.layer.11.attention.self.query.weight"), "blk.11.attn_q.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.self.key.bias"), "blk.0.attn_k.bias");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.self.value.weight"), "blk.0.attn_v.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.output.dense.weight"), "blk.0.attn_output.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.attention.output.LayerNorm.weight"), "blk.0.attn_output_norm.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.intermediate.dense.weight"), "blk.0.ffn_up.weight");
    EXPECT_EQ(target(m, "encoder.layer.0.output.dense.bias"), "blk.0.ffn_down.bias");
    EXPECT_EQ(target(m, "encoder.layer.0.output.LayerNorm.gamma"), "blk.0.layer_output_norm.weight");  // TF-era names
    EXPECT_EQ(target(m, "bert.encoder.layer.3.output.LayerNorm.beta"), "blk.3.layer_output_norm.bias");
    // What the converter drops: the position-id buffer, an embedding model's pooler, pre-training heads.
    EXPECT_EQ(target(m, "embeddings.position_ids"), "(not loaded)");
    EXPECT_EQ(target(m, "pooler.dense.weight"), "(not loaded)");
    EXPECT_EQ(target(m, "cls.predictions.transform.dense.weight"), "(not loaded)");
    EXPECT_NE(error_of([&] { gguf_target(m, "encoder.layer.12.output.dense.weight"); }).find("not a tensor pagoda knows"),
              std::string::npos);
    EXPECT_NE(error_of([&] { gguf_target(m, "classifier.weight"); }).find("'classifier.weight'"), std::string::npos);
}

TEST(HfEncoderConfig, BgeRerankerDropsThePositionOffsetAndMapsTheHead) {
    const HfModel m = read_hf_config(kBgeReranker, "config.json");
    EXPECT_EQ(meta_int(m, "bert.context_length"), 8192);  // 8194 - (pad_token_id 1 + 1), as the converter writes
    EXPECT_EQ(m.position_offset, 2);
    EXPECT_EQ(meta_int(m, "bert.pooling_type"), 4);
    EXPECT_EQ(meta_int(m, "tokenizer.ggml.token_type_count"), 1);
    const gguf::Value* labels = meta(m, "bert.classifier.output_labels");
    ASSERT_NE(labels, nullptr);
    ASSERT_EQ(labels->as_array()->items.size(), 1u);
    EXPECT_EQ(*labels->as_array()->items[0].as_string(), "LABEL_0");
    EXPECT_EQ(target(m, "roberta.embeddings.position_embeddings.weight"), "position_embd.weight");
    EXPECT_EQ(gguf_target(m, "roberta.embeddings.position_embeddings.weight")->skip_rows, 2);
    EXPECT_EQ(target(m, "roberta.encoder.layer.23.attention.self.query.weight"), "blk.23.attn_q.weight");
    EXPECT_EQ(target(m, "classifier.dense.weight"), "cls.weight");
    EXPECT_EQ(target(m, "classifier.out_proj.bias"), "cls.output.bias");
    // The inverse names, for writing.
    EXPECT_EQ(hf_source(m, "cls.output.weight").hf_names.at(0), "classifier.out_proj.weight");
    EXPECT_EQ(hf_source(m, "blk.2.ffn_up.bias").hf_names.at(0), "roberta.encoder.layer.2.intermediate.dense.bias");
    EXPECT_EQ(hf_source(m, "position_embd.weight").pad_rows, 2);

    // BERT's cross-encoder: the pooler is the head's dense layer, classifier its output; the two
    // placeholder labels transformers adds are not labels.
    std::string bert = kBgeSmall;
    bert.replace(bert.find("\"BertModel\""), 11, "\"BertForSequenceClassification\"");
    bert.replace(bert.find("{\"0\":\"LABEL_0\"}"), 15, "{\"1\":\"LABEL_1\",\"0\":\"LABEL_0\"}");
    const HfModel b = read_hf_config(bert, "config.json");
    EXPECT_EQ(meta(b, "bert.classifier.output_labels"), nullptr);
    EXPECT_EQ(target(b, "bert.pooler.dense.weight"), "cls.weight");
    EXPECT_EQ(target(b, "classifier.bias"), "cls.output.bias");
    bert.replace(bert.find("LABEL_1"), 7, "entails");
    bert.replace(bert.find("LABEL_0"), 7, "neutral");
    const HfModel labelled = read_hf_config(bert, "config.json");
    const gguf::Value* named = meta(labelled, "bert.classifier.output_labels");
    ASSERT_NE(named, nullptr);
    EXPECT_EQ(*named->as_array()->items[1].as_string(), "entails");  // in index order
}

TEST(HfEncoderConfig, RefusalsNameTheKey) {
    auto with = [](std::string json, const std::string& from, const std::string& to) {
        json.replace(json.find(from), from.size(), to);
        return json;
    };
    EXPECT_NE(config_error(with(kBgeSmall, "\"hidden_size\":384", "\"x\":1")).find("key 'hidden_size' is missing"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeSmall, "\"hidden_act\":\"gelu\"", "\"hidden_act\":\"relu\"")).find("'hidden_act' is 'relu'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeSmall, "\"absolute\"", "\"relative_key\"")).find("'position_embedding_type'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeSmall, "\"num_attention_heads\":12", "\"num_attention_heads\":7")).find("'hidden_size'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeReranker, "\"pad_token_id\":1", "\"pad_token_id\":9000")).find("'pad_token_id'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeReranker, "{\"0\":\"LABEL_0\"}", "{\"zero\":\"LABEL_0\"}")).find("'id2label.zero'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeReranker, "{\"0\":\"LABEL_0\"}", "{\"1\":\"LABEL_0\"}")).find("'id2label'"),
              std::string::npos);
    EXPECT_NE(config_error(with(kBgeSmall, "\"layer_norm_eps\":1e-12", "\"layer_norm_eps\":\"small\"")).find("'layer_norm_eps'"),
              std::string::npos);
    EXPECT_NE(config_error(R"({"architectures":["NomicBertForPreTraining"]})").find("is not supported"), std::string::npos);
}

TEST(HfEncoderConfig, SentenceTransformersPooling) {
    const char* modules = R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
      {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
      {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";
    EXPECT_EQ(pooling_module_path(modules, "modules.json"), "1_Pooling");
    EXPECT_EQ(pooling_module_path(R"([{"path":"","type":"sentence_transformers.models.Transformer"}])", "modules.json"),
              std::nullopt);
    EXPECT_NE(error_of([] { pooling_module_path(R"([{"path":"../x","type":"sentence_transformers.models.Pooling"}])", "m"); })
                  .find("not a folder inside"),
              std::string::npos);
    EXPECT_NE(error_of([] { pooling_module_path(R"({"path":"1_Pooling"})", "m"); }).find("not a list"), std::string::npos);
    // The converter's order: mean, then cls, then last.
    EXPECT_EQ(pooling_type_of(R"({"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":true})", "p"), 1);
    EXPECT_EQ(pooling_type_of(R"({"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":false})", "p"), 2);
    EXPECT_EQ(pooling_type_of(R"({"pooling_mode_lasttoken":true})", "p"), 3);
    EXPECT_NE(error_of([] { pooling_type_of(R"({"pooling_mode_max_tokens":true})", "p"); }).find("'pooling_mode_max_tokens'"),
              std::string::npos);
    EXPECT_NE(error_of([] { pooling_type_of(R"({"pooling_mode_cls_token":1})", "p"); }).find("'pooling_mode_cls_token'"),
              std::string::npos);
    EXPECT_NE(error_of([] { pooling_type_of("{}", "p"); }).find("no pooling mode"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::hf

namespace pagoda::hf {
namespace {

using config_test::config_error;
using config_test::error_of;
using config_test::meta;
using config_test::meta_int;

std::string with_nomic(const std::string& from, const std::string& to) {
    std::string s = kNomicV15;
    const size_t at = s.find(from);
    if (at == std::string::npos) throw std::runtime_error("test: no " + from);
    return s.replace(at, from.size(), to);
}

// What llama.cpp's converter writes for nomic-embed-text-v1.5: nomic-bert, context 2048, RoPE base
// 1000, and its tensor map (emb_ln, attn.Wqkv, mlp.fc11 up / fc12 gate / fc2 down, norm1 / norm2).
TEST(HfEncoderConfig, NomicEmbedMapsToNomicBertKeysAndNames) {
    const HfModel m = read_hf_config(kNomicV15, "config.json");
    EXPECT_EQ(m.arch, "nomic-bert");
    EXPECT_TRUE(m.encoder);
    EXPECT_EQ(meta_int(m, "nomic-bert.context_length"), 2048);
    EXPECT_EQ(meta_int(m, "nomic-bert.embedding_length"), 768);
    EXPECT_EQ(meta_int(m, "nomic-bert.feed_forward_length"), 3072);
    EXPECT_EQ(meta_int(m, "nomic-bert.block_count"), 12);
    EXPECT_EQ(meta_int(m, "nomic-bert.attention.head_count"), 12);
    EXPECT_EQ(meta_int(m, "tokenizer.ggml.token_type_count"), 2);
    EXPECT_FLOAT_EQ(float(*meta(m, "nomic-bert.attention.layer_norm_epsilon")->as_float()), 1e-12f);
    EXPECT_FLOAT_EQ(float(*meta(m, "nomic-bert.rope.freq_base")->as_float()), 1000.0f);
    EXPECT_FALSE(std::get<bool>(meta(m, "nomic-bert.attention.causal")->data));
    EXPECT_EQ(meta(m, "nomic-bert.pooling_type"), nullptr);  // from modules.json only
    EXPECT_EQ(target(m, "embeddings.word_embeddings.weight"), "token_embd.weight");
    EXPECT_EQ(target(m, "embeddings.token_type_embeddings.weight"), "token_types.weight");
    EXPECT_EQ(target(m, "emb_ln.bias"), "token_embd_norm.bias");
    EXPECT_EQ(target(m, "encoder.layers.11.attn.Wqkv.weight"), "blk.11.attn_qkv.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.attn.out_proj.weight"), "blk.0.attn_output.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.norm1.weight"), "blk.0.attn_output_norm.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.mlp.fc11.weight"), "blk.0.ffn_up.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.mlp.fc12.weight"), "blk.0.ffn_gate.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.mlp.fc2.weight"), "blk.0.ffn_down.weight");
    EXPECT_EQ(target(m, "encoder.layers.0.norm2.bias"), "blk.0.layer_output_norm.bias");
    EXPECT_EQ(target(m, "bert.encoder.layers.3.norm2.bias"), "blk.3.layer_output_norm.bias");
    EXPECT_EQ(target(m, "embeddings.position_ids"), "(not loaded)");
    EXPECT_EQ(hf_source(m, "blk.7.ffn_gate.weight").hf_names, std::vector<std::string>{"encoder.layers.7.mlp.fc12.weight"});
    EXPECT_EQ(hf_source(m, "token_embd_norm.weight").hf_names, std::vector<std::string>{"emb_ln.weight"});
    for (const char* unknown : {"encoder.layers.12.norm1.weight", "encoder.layers.01.norm1.weight", "encoder.layer.0.norm1.weight",
                                "pooler.dense.weight", "emb_ln.scale"})
        EXPECT_NE(error_of([&] { gguf_target(m, unknown); }).find("is not a tensor pagoda knows for NomicBertModel"),
                  std::string::npos) << unknown;
    EXPECT_NE(error_of([&] { hf_source(m, "blk.0.attn_q.weight"); }).find("no Hugging Face name"), std::string::npos);
    // Without max_trained_positions the context is n_positions.
    const HfModel untrained = read_hf_config(with_nomic("\"max_trained_positions\":2048,", ""), "config.json");
    EXPECT_EQ(meta_int(untrained, "nomic-bert.context_length"), 8192);
}

TEST(HfEncoderConfig, NomicRefusesWhatItsBuilderDoesNotCompute) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"\"activation_function\":\"swiglu\"", "\"activation_function\":\"gelu\""},
        {"\"causal\":false", "\"causal\":true"},
        {"\"prenorm\":false", "\"prenorm\":true"},
        {"\"qkv_proj_bias\":false", "\"qkv_proj_bias\":true"},
        {"\"mlp_fc1_bias\":false", "\"mlp_fc1_bias\":true"},
        {"\"mlp_fc2_bias\":false", "\"mlp_fc2_bias\":true"},
        {"\"rotary_emb_fraction\":1.0", "\"rotary_emb_fraction\":0.5"},
        {"\"rotary_emb_interleaved\":false", "\"rotary_emb_interleaved\":true"},
        {"\"rotary_emb_scale_base\":null", "\"rotary_emb_scale_base\":512"},
        {"\"rotary_scaling_factor\":null", "\"rotary_scaling_factor\":2"},
        {"\"use_rms_norm\":false", "\"use_rms_norm\":true"},
        {"\"parallel_block\":false", "\"parallel_block\":true"},
        {"\"causal\":false", "\"causal\":false,\"moe_every_n_layers\":2"},
        {"\"rotary_emb_base\":1000", "\"rotary_emb_base\":0"},
        {"\"layer_norm_epsilon\":1e-12", "\"layer_norm_epsilon\":2"},
        {"\"n_embd\":768", "\"n_embd\":770"},
        {"\"n_inner\":3072,", ""},
    };
    for (const auto& [from, to] : cases) {
        const std::string key = from.substr(1, from.find('"', 1) - 1);
        const std::string err = config_error(with_nomic(from, to));
        EXPECT_NE(err.find("'" + (key == "causal" && to.find("moe") != std::string::npos ? "moe_every_n_layers" : key) + "'"),
                  std::string::npos) << to << ": " << err;
    }
}

}  // namespace
}  // namespace pagoda::hf
