// BERT-family Hugging Face folders (hf/hf_encoder_config.h): the folder gen-model writes for a random
// `bert` GGUF (BertModel, RobertaModel, XLMRobertaModel, their *ForSequenceClassification) or
// `nomic-bert` GGUF (NomicBertModel) loads back
// to the GGUF's tensors byte for byte and gives bitwise-equal hidden states and classifier scores on
// the CPU backend; RoBERTa's position offset is checked against the folder's own rows; real configs
// (bge-small, bge-reranker-v2-m3 shapes) map to the converter's keys and names; malformed configs
// and pooling files are refused with the key named.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "encoder_hidden_states.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_tensor_names.h"
#include "hf/safetensors.h"
#include "model/classifier_head.h"
#include "model/model_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

using encoder_test::hidden_states;

RandomModelSpec encoder_spec(const std::string& vocab, const std::string& hf_class) {
    RandomModelSpec s;
    s.arch = "bert";
    s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.ffn_dim = 72; s.vocab_size = 300; s.context_length = 40; s.seed = 11;
    s.encoder_vocab = vocab;
    s.hf_class = hf_class;
    return s;
}

void expect_same_tensors(const gguf::File& g, const gguf::File& h, const std::string& arch = "bert") {
    for (const auto& t : g.tensors()) {
        const gguf::TensorInfo* v = h.find_tensor(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        EXPECT_EQ(v->type, t.type) << t.name;
        EXPECT_EQ(v->shape, t.shape) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name << " differs";
    }
    EXPECT_EQ(h.tensors().size(), g.tensors().size());
    for (const char* key : {"context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                            "pooling_type"})
        EXPECT_EQ(h.get_int_or(arch + "." + key, -1), g.get_int_or(arch + "." + key, -1)) << key;
    EXPECT_EQ(h.get_float(arch + ".attention.layer_norm_epsilon"), g.get_float(arch + ".attention.layer_norm_epsilon"));
    EXPECT_FALSE(h.get_bool_or(arch + ".attention.causal", true));
    EXPECT_EQ(h.get_string("tokenizer.ggml.model"), g.get_string("tokenizer.ggml.model"));
    EXPECT_EQ(h.get_strings("tokenizer.ggml.tokens"), g.get_strings("tokenizer.ggml.tokens"));
}

nlohmann::json config_of(const std::string& dir) {
    std::ifstream in(dir + "/config.json");
    return nlohmann::json::parse(in);
}

struct Written {
    std::shared_ptr<const gguf::File> gguf, hf;
    std::string dir;
};

Written write_both(const std::string& label, const RandomModelSpec& spec) {
    const std::string path = test::temp_path("hf-enc-" + label + ".gguf"), dir = test::temp_path("hf-enc-" + label);
    std::filesystem::remove_all(dir);
    write_random_model(spec, nullptr, path);
    write_random_model_hf(spec, dir);
    return {open_model_file(path), open_model_file(dir), dir};
}

TEST(HfEncoder, FoldersGiveTheGgufTensorsAndHiddenStates) {
    struct Case {
        std::string label, vocab, hf_class, pooling, want_class;
        int64_t offset;  // rows before GGUF position 0 in the folder's table
    };
    const Case cases[] = {{"bert", "wordpiece", "", "mean", "BertModel", 0},
                          {"xlmr", "unigram", "", "cls", "XLMRobertaModel", 2},  // <pad> is id 1
                          {"roberta", "wordpiece", "RobertaModel", "mean", "RobertaModel", 1}};  // [PAD] is id 0
    for (const Case& c : cases) {
        SCOPED_TRACE(c.label);
        RandomModelSpec spec = encoder_spec(c.vocab, c.hf_class);
        spec.pooling = c.pooling;
        const Written w = write_both(c.label, spec);
        const nlohmann::json config = config_of(w.dir);
        EXPECT_EQ(config["architectures"][0], c.want_class);
        EXPECT_EQ(config["max_position_embeddings"], 40 + c.offset);
        expect_same_tensors(*w.gguf, *w.hf);
        EXPECT_EQ(w.hf->get_int("bert.pooling_type"), c.pooling == "mean" ? 1 : 2);  // from modules.json + 1_Pooling

        // The folder's position table, read directly: GGUF row i is HF row offset + i; the rows before are zeros.
        auto st = hf::SafetensorsFile::open(w.dir + "/model.safetensors");
        const auto* pos = st->find("embeddings.position_embeddings.weight");
        ASSERT_NE(pos, nullptr);
        EXPECT_EQ(pos->shape, (std::vector<int64_t>{40 + c.offset, 48}));
        const gguf::TensorInfo* g = w.gguf->find_tensor("position_embd.weight");
        EXPECT_EQ(std::memcmp(pos->data + c.offset * 48 * 4, g->data, g->n_bytes), 0);
        for (int64_t i = 0; i < c.offset * 48 * 4; ++i) ASSERT_EQ(pos->data[i], 0) << i;
        EXPECT_NE(st->find("encoder.layer.1.attention.self.query.bias"), nullptr);  // *Model: no prefix

        ASSERT_NO_FATAL_FAILURE(encoder_test::expect_same_hidden_states(w.gguf, w.hf, 48));
    }
}

// nomic-embed's form (NomicBertModel): RoPE, fused Wqkv, SwiGLU, no biases, no position table.
TEST(HfEncoder, NomicFolderGivesTheGgufTensorsAndHiddenStates) {
    RandomModelSpec spec = encoder_spec("wordpiece", "");
    spec.arch = "nomic-bert";
    const Written w = write_both("nomic", spec);
    const nlohmann::json config = config_of(w.dir);
    EXPECT_EQ(config["architectures"][0], "NomicBertModel");
    EXPECT_EQ(config["n_positions"], 40);
    EXPECT_EQ(config["rotary_emb_base"], 1000);
    EXPECT_EQ(w.hf->get_string("general.architecture"), "nomic-bert");
    expect_same_tensors(*w.gguf, *w.hf, "nomic-bert");
    EXPECT_EQ(w.hf->get_float("nomic-bert.rope.freq_base"), w.gguf->get_float("nomic-bert.rope.freq_base"));
    EXPECT_EQ(w.hf->get_int("nomic-bert.pooling_type"), 1);  // from modules.json + 1_Pooling
    auto st = hf::SafetensorsFile::open(w.dir + "/model.safetensors");
    for (const char* name : {"emb_ln.weight", "embeddings.token_type_embeddings.weight", "encoder.layers.1.attn.Wqkv.weight",
                             "encoder.layers.1.mlp.fc11.weight", "encoder.layers.1.mlp.fc12.weight", "encoder.layers.1.norm2.bias"})
        EXPECT_NE(st->find(name), nullptr) << name;
    EXPECT_EQ(st->find("encoder.layers.0.attn.Wqkv.weight")->shape, (std::vector<int64_t>{3 * 48, 48}));
    // fc12 is the gated (SiLU) half: the GGUF's ffn_gate, byte for byte.
    const gguf::TensorInfo* gate = w.gguf->find_tensor("blk.0.ffn_gate.weight");
    EXPECT_EQ(std::memcmp(st->find("encoder.layers.0.mlp.fc12.weight")->data, gate->data, gate->n_bytes), 0);

    ASSERT_NO_FATAL_FAILURE(encoder_test::expect_same_hidden_states(w.gguf, w.hf, 48));
}

TEST(HfEncoder, NomicIsWrittenAsNomicBertModelOnly) {
    RandomModelSpec spec = encoder_spec("wordpiece", "BertModel");
    spec.arch = "nomic-bert";
    const std::string dir = test::temp_path("hf-enc-nomic-class");
    try {
        write_random_model_hf(spec, dir);
        FAIL() << "a nomic-bert model written as BertModel";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--hf-class is for --arch bert"), std::string::npos) << e.what();
    }
}

TEST(HfEncoder, F16FolderLoadsAsItsGguf) {
    RandomModelSpec spec = encoder_spec("unigram", "");
    spec.type = gguf::GgmlType::F16;
    const Written w = write_both("xlmr-f16", spec);
    expect_same_tensors(*w.gguf, *w.hf);
    EXPECT_EQ(w.hf->find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::F16);
    const std::vector<float> a = hidden_states(w.gguf), b = hidden_states(w.hf);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

// Cross-encoders: the head's tensors under the classes' own names, and equal scores on the CLS row.
TEST(HfEncoder, CrossEncodersGiveTheSameScores) {
    struct Case {
        std::string label, vocab, want_class, dense_name, out_name;
    };
    const Case cases[] = {{"bert-rank", "wordpiece", "BertForSequenceClassification", "bert.pooler.dense.weight", "classifier.weight"},
                          {"xlmr-rank", "unigram", "XLMRobertaForSequenceClassification", "classifier.dense.weight",
                           "classifier.out_proj.weight"}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.label);
        RandomModelSpec spec = encoder_spec(c.vocab, "");
        spec.rank_head = "dense";
        const Written w = write_both(c.label, spec);
        EXPECT_EQ(config_of(w.dir)["architectures"][0], c.want_class);
        EXPECT_FALSE(std::filesystem::exists(w.dir + "/modules.json"));
        auto st = hf::SafetensorsFile::open(w.dir + "/model.safetensors");
        EXPECT_NE(st->find(c.dense_name), nullptr);
        EXPECT_NE(st->find(c.out_name), nullptr);
        EXPECT_NE(st->find(c.label == "bert-rank" ? "bert.embeddings.word_embeddings.weight"
                                                  : "roberta.embeddings.word_embeddings.weight"),
                  nullptr);
        expect_same_tensors(*w.gguf, *w.hf);
        EXPECT_EQ(w.hf->get_int("bert.pooling_type"), 4);
        auto head_g = ClassifierHead::from_gguf(*w.gguf, "bert", 48), head_h = ClassifierHead::from_gguf(*w.hf, "bert", 48);
        ASSERT_TRUE(head_g && head_h);
        ASSERT_TRUE(head_h->dense() && head_h->output());
        const std::vector<float> a = hidden_states(w.gguf), b = hidden_states(w.hf);
        ASSERT_EQ(a.size(), b.size());
        for (size_t row : {size_t(0), size_t(11)}) {  // each sequence's CLS row
            const std::vector<float> ca(a.begin() + long(row * 48), a.begin() + long(row * 48 + 48));
            const std::vector<float> cb(b.begin() + long(row * 48), b.begin() + long(row * 48 + 48));
            const double sa = head_g->score(ca), sb = head_h->score(cb);
            EXPECT_EQ(std::memcmp(&sa, &sb, sizeof sa), 0) << sa << " vs " << sb;
        }
    }
}

TEST(HfEncoder, AModelWithoutModulesJsonHasNoPoolingKey) {
    const Written w = write_both("bert-nomodules", encoder_spec("wordpiece", ""));
    std::filesystem::remove(w.dir + "/modules.json");
    EXPECT_FALSE(open_model_file(w.dir)->has("bert.pooling_type"));
    std::filesystem::remove(w.dir + "/1_Pooling/config.json");
    std::ofstream(w.dir + "/modules.json") << R"([{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])";
    try {
        open_model_file(w.dir);
        ADD_FAILURE() << "a Pooling module without its config.json";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("1_Pooling/config.json"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::model
