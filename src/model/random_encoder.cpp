// gen-model's `bert`, `nomic-bert` and `jina-bert-v2` writer (random_model.h): the metadata keys and
// tensors llama.cpp's converter writes for a BERT-family embedding model (nomic-bert: no position table
// but RoPE base 1000, one fused attn_qkv, SwiGLU, no biases; jina-bert-v2: no position table (ALiBi),
// Q/K/V and output biases, a GEGLU FFN without an up bias, and with qk_norm the -code form's Q/K
// LayerNorms and attn_norm_2), and a synthetic WordPiece vocabulary in its "bert"
// tokenizer form: tokenizer/random_vocab.h's (every ASCII character a piece) from 128 tokens up,
// else a small one of letter n-grams ([PAD] [UNK] [CLS] [SEP] [MASK], pieces, "##" continuations).
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_model.h"
#include "model/random_tensors.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/random_vocab.h"

namespace pagoda::model {

using gguf::GgmlType;
using gguf::Value;
using random_detail::random_tensor;
using random_detail::Rng;

namespace {

void write_wordpiece_vocab(gguf::Writer& w, int64_t vocab_size) {
    if (vocab_size < 5 + 26) fail("a synthetic WordPiece vocabulary needs at least 31 tokens, got {}", vocab_size);
    std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    std::vector<int32_t> types = {3, 2, 3, 3, 3};  // control, unknown, control...
    const std::string letters = "etaoinshrdlucmfwypvbgkqjxz";
    std::vector<std::string> grams;
    for (char c : letters) grams.push_back(std::string(1, c));
    for (char a : letters) for (char b : letters) grams.push_back(std::string{a, b});
    for (char a : letters) for (char b : letters) for (char c : letters) grams.push_back(std::string{a, b, c});
    for (size_t i = 0; int64_t(tokens.size()) < vocab_size && i < grams.size(); ++i)
        for (const std::string& piece : {grams[i], "##" + grams[i]}) {
            if (int64_t(tokens.size()) >= vocab_size) break;
            tokens.push_back(piece);
            types.push_back(1);
        }
    if (int64_t(tokens.size()) < vocab_size) fail("synthetic WordPiece vocabulary is limited to {} tokens", tokens.size());
    w.set("tokenizer.ggml.model", Value::string("bert"));
    w.set("tokenizer.ggml.tokens", Value::strings(tokens));
    w.set("tokenizer.ggml.token_type", Value::i32s(types));
    w.set("tokenizer.ggml.token_type_count", Value::u32(2));
    w.set("tokenizer.ggml.padding_token_id", Value::u32(0));
    w.set("tokenizer.ggml.unknown_token_id", Value::u32(1));
    w.set("tokenizer.ggml.cls_token_id", Value::u32(2));
    w.set("tokenizer.ggml.seperator_token_id", Value::u32(3));  // sic: llama.cpp's spelling of the key
    w.set("tokenizer.ggml.mask_token_id", Value::u32(4));
}

}  // namespace

int64_t build_random_bert(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    if (s.n_layers <= 0 || s.dim <= 0 || s.n_heads <= 0 || s.ffn_dim <= 0) fail("gen-model: every size must be positive");
    if (s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    if (s.n_experts > 0 || !s.rope_scaling.empty() || s.head_dim > 0)
        fail("gen-model: {} takes no experts, RoPE scaling or head size", s.arch);
    if (!s.rank_head.empty() && s.rank_head != "output" && s.rank_head != "dense")
        fail("gen-model: the rank head is 'output' or 'dense', not '{}'", s.rank_head);
    int pooling = 0;
    if (s.pooling == "mean") pooling = 1;
    else if (s.pooling == "cls") pooling = 2;
    else fail("gen-model: {} pooling is 'mean' or 'cls', not '{}'", s.arch, s.pooling);
    if (s.encoder_vocab != "wordpiece" && s.encoder_vocab != "unigram")
        fail("gen-model: the encoder vocabulary is 'wordpiece' or 'unigram', not '{}'", s.encoder_vocab);

    const bool nomic = s.arch == "nomic-bert", jina = s.arch == "jina-bert-v2";
    if (s.qk_norm && !random_detail::LayerManifest(s.arch).has("attn_q_norm.weight"))
        fail("gen-model: {} has no Q/K norms (--qk-norm)", s.arch);
    const std::string a = s.arch + ".";
    w.set("general.architecture", Value::string(s.arch));
    w.set("general.name", Value::string(s.name));
    w.set(a + "block_count", Value::u32(uint32_t(s.n_layers)));
    w.set(a + "context_length", Value::u32(uint32_t(s.context_length)));
    w.set(a + "embedding_length", Value::u32(uint32_t(s.dim)));
    w.set(a + "feed_forward_length", Value::u32(uint32_t(s.ffn_dim)));
    w.set(a + "attention.head_count", Value::u32(uint32_t(s.n_heads)));
    w.set(a + "attention.layer_norm_epsilon", Value::f32(1e-12f));
    w.set(a + "attention.causal", Value::boolean(false));
    // A cross-encoder reranker (rank, 4) scores its CLS row with the classification head.
    w.set(a + "pooling_type", Value::u32(uint32_t(s.rank_head.empty() ? pooling : 4)));
    if (nomic) w.set(a + "rope.freq_base", Value::f32(1000.0f));
    random_detail::write_file_type(w, s.type);
    int64_t vocab_size = s.vocab_size;
    if (vocab) {
        for (const auto& [key, value] : vocab->metadata())
            if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
        vocab_size = int64_t(vocab->get_strings("tokenizer.ggml.tokens").size());
    } else if (s.encoder_vocab == "unigram") {  // XLM-R's layout (tokenizer/random_vocab.h)
        for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(tokenizer::make_random_unigram_spec(vocab_size, s.seed), ""))
            w.set(key, value);
    } else if (vocab_size >= 128) {
        // A WordPiece vocabulary that spells any ASCII text without unknowns (tokenizer/random_vocab.h).
        for (auto& [key, value] :
             tokenizer::vocab_spec_gguf_keys(tokenizer::make_random_wordpiece_spec(vocab_size, s.seed), ""))
            w.set(key, value);
    } else {
        write_wordpiece_vocab(w, vocab_size);
    }

    Rng rng(s.seed);
    int64_t params = 0;
    auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, float stddev) {
        w.add_tensor(name, s.type, {cols, rows}, random_tensor(rng, cols * rows, stddev, s.type));
        params += cols * rows;
    };
    auto vec = [&](const std::string& name, int64_t n, std::vector<uint8_t> bytes) {
        w.add_tensor(name, GgmlType::F32, {n}, std::move(bytes));
        params += n;
    };
    // LayerNorm weights around 1 and biases around 0, so the norms' every term is exercised.
    auto layer_norm = [&](const std::string& name) {
        std::vector<uint8_t> weight = random_tensor(rng, s.dim, 0.2f, GgmlType::F32);
        for (int64_t i = 0; i < s.dim; ++i) reinterpret_cast<float*>(weight.data())[i] += 1.0f;
        vec(name + ".weight", s.dim, std::move(weight));
        vec(name + ".bias", s.dim, random_tensor(rng, s.dim, 0.1f, GgmlType::F32));
    };
    auto bias = [&](const std::string& name, int64_t n) { vec(name, n, random_tensor(rng, n, 0.1f, GgmlType::F32)); };
    const float in_scale = 1.0f / std::sqrt(float(s.dim));
    matrix("token_embd.weight", s.dim, vocab_size, 1.0f);
    // Token types stay F32 as the converter keeps small tables; two types (single texts use type 0).
    w.add_tensor("token_types.weight", GgmlType::F32, {s.dim, 2}, random_tensor(rng, s.dim * 2, 0.5f, GgmlType::F32));
    params += s.dim * 2;
    if (!nomic && !jina) matrix("position_embd.weight", s.dim, s.context_length, 0.5f);
    layer_norm("token_embd_norm");
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        if (nomic) {
            matrix(p + "attn_qkv.weight", s.dim, 3 * s.dim, in_scale);
        } else {
            for (const char* part : {"attn_q", "attn_k", "attn_v"}) {
                matrix(p + part + ".weight", s.dim, s.dim, in_scale);
                bias(p + part + ".bias", s.dim);
            }
        }
        if (jina && s.qk_norm) {  // over the whole Q and K rows
            layer_norm(p + "attn_q_norm");
            layer_norm(p + "attn_k_norm");
        }
        matrix(p + "attn_output.weight", s.dim, s.dim, in_scale);
        if (!nomic) bias(p + "attn_output.bias", s.dim);
        layer_norm(p + "attn_output_norm");
        if (jina && s.qk_norm) layer_norm(p + "attn_norm_2");
        if (nomic || (jina && s.qk_norm)) matrix(p + "ffn_gate.weight", s.dim, s.ffn_dim, in_scale);
        matrix(p + "ffn_up.weight", s.dim, jina && !s.qk_norm ? 2 * s.ffn_dim : s.ffn_dim, in_scale);
        if (!nomic && !jina) bias(p + "ffn_up.bias", s.ffn_dim);
        matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, 1.0f / std::sqrt(float(s.ffn_dim)));
        if (!nomic) bias(p + "ffn_down.bias", s.dim);
        layer_norm(p + "layer_output_norm");
    }
    if (!s.rank_head.empty() && jina) {  // jina-reranker-v1: one projection of the CLS row to a score
        matrix("cls.weight", s.dim, 1, in_scale);
        bias("cls.bias", 1);
    } else if (!s.rank_head.empty()) {  // BertForSequenceClassification as the converter writes it
        const int64_t classes = s.rank_classes > 0 ? s.rank_classes : 1;
        if (s.rank_head == "dense") {
            matrix("cls.weight", s.dim, s.dim, in_scale);
            bias("cls.bias", s.dim);
        }
        matrix("cls.output.weight", s.dim, classes, in_scale);
        bias("cls.output.bias", classes);
    }
    return params;
}

}  // namespace pagoda::model
