// gemma4's files and load-time checks: the tensors and keys gen-model writes by llama.cpp's names
// (experts, shared KV, V = K, the E2B/E4B's per-layer embeddings and per-layer FFN widths), the KV
// the sharing layers no longer store, tower tensors skipped, the tokenizer model, and the forms
// refused by name.
#include <functional>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "gemma4_test_spec.h"
#include "model_compare.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagoda::model {
namespace {

using gemma4_test::gemma4_moe_spec;
using gemma4_test::gemma4_ple_spec;
using gemma4_test::gemma4_spec;
using model_compare::prompt;
using model_compare::reference_logits;

TEST(Gemma4Direct, FileLayoutOfPerLayerEmbeddings) {
    // The E2B/E4B's tensors by llama.cpp's names and shapes, and the per-layer FFN widths read back.
    const std::string path = test::temp_path("gemma4_ple_shapes.gguf");
    write_random_model(gemma4_ple_spec(66), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.layer_ffn_dims, (std::vector<int64_t>{96, 96, 96, 96, 192, 192}));  // KV-sharing layers: double
    EXPECT_EQ(cfg.ffn_dim, 192);
    EXPECT_EQ(cfg.layer_ffn_dim(0), 96);
    EXPECT_EQ(cfg.layer_ffn_dim(5), 192);
    using Shape = std::vector<int64_t>;
    EXPECT_EQ(file->find_tensor("per_layer_token_embd.weight")->shape, (Shape{32 * 6, 300}));
    EXPECT_EQ(file->find_tensor("per_layer_model_proj.weight")->shape, (Shape{64, 32 * 6}));
    EXPECT_EQ(file->find_tensor("per_layer_proj_norm.weight")->shape, (Shape{32}));
    EXPECT_EQ(file->find_tensor("blk.2.inp_gate.weight")->shape, (Shape{64, 32}));
    EXPECT_EQ(file->find_tensor("blk.2.proj.weight")->shape, (Shape{32, 64}));
    EXPECT_EQ(file->find_tensor("blk.2.post_norm.weight")->shape, (Shape{64}));
    EXPECT_EQ(file->find_tensor("blk.5.ffn_down.weight")->shape, (Shape{192, 64}));
}

// Layers that share KV store none: the paged KV's block holds K and V of the 4 layers with their own
// (6 layers, 2 sharing), each 2 KV heads x 32 values x 4 tokens of f32.
TEST(Gemma4Direct, KvSharingLayersStoreNoKv) {
    for (const int64_t shared : {int64_t(0), int64_t(2)}) {
        const std::string path = test::temp_path("gemma4_kv_bytes_" + std::to_string(shared) + ".gguf");
        write_random_model(gemma4_spec(67, shared, shared > 0), nullptr, path);
        const KvOptions kvo{.block_size = 4, .dtype = kv::KvDtype::f32};
        auto model = open_step_model(path, {.backend = "reference", .kv = kvo, .tokens_wanted = 64});
        EXPECT_EQ(model->info().kv_bytes_per_block, size_t(2 * (6 - shared) * 2 * 32 * 4 * 4)) << shared;
    }
}

TEST(Gemma4Direct, FileLayoutOfTheExperts) {
    // The 26B-A4B's tensors by llama.cpp's names and shapes, and its expert keys read back.
    const std::string path = test::temp_path("gemma4_moe_shapes.gguf");
    write_random_model(gemma4_moe_spec(65), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.n_experts, 6);
    EXPECT_EQ(cfg.n_experts_used, 2);
    EXPECT_EQ(cfg.expert_ffn_dim, 48);
    EXPECT_EQ(cfg.ffn_dim, 96);  // the dense FFN beside the experts keeps its own width
    EXPECT_TRUE(cfg.expert_weights_norm);
    using Shape = std::vector<int64_t>;
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_up_exps.weight")->shape, (Shape{64, 2 * 48, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_down_exps.weight")->shape, (Shape{48, 64, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_down_exps.scale")->shape, (Shape{6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_inp.weight")->shape, (Shape{64, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_inp.scale")->shape, (Shape{64}));
    for (const char* norm : {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2", "ffn_norm", "post_ffw_norm"})
        EXPECT_NE(file->find_tensor(std::string("blk.3.") + norm + ".weight"), nullptr) << norm;
}

TEST(Gemma4Direct, FileLayoutOfSharedKvAndVEqualsK) {
    // The sharing layers hold no K/V tensors, full layers with V = K no attn_v, and the per-layer
    // KV-head array reads as one count.
    const std::string path = test::temp_path("gemma4_shapes.gguf");
    write_random_model(gemma4_spec(63), nullptr, path);
    auto file = gguf::File::open(path);
    EXPECT_EQ(file->find_tensor("blk.4.attn_k.weight"), nullptr);
    EXPECT_EQ(file->find_tensor("blk.5.attn_k_norm.weight"), nullptr);
    EXPECT_EQ(file->find_tensor("blk.2.attn_v.weight"), nullptr);   // full layer: V = K
    EXPECT_NE(file->find_tensor("blk.1.attn_v.weight"), nullptr);   // sliding layer: its own V
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.n_kv_heads, 2);  // the largest of the per-layer counts (2 sliding, 1 full)
    EXPECT_EQ(cfg.head_dim, 32);   // the larger head size (16 sliding, 32 full): the paged KV's row
    EXPECT_EQ(file->find_tensor("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{64, 2 * 16}));
    EXPECT_EQ(file->find_tensor("blk.2.attn_k.weight")->shape, (std::vector<int64_t>{64, 1 * 32}));
}

// llama.cpp writes the E-models' vision and audio towers to a separate mmproj file; a text file that
// carries tower tensors anyway (names outside the text model's) loads as the text model, unchanged.
TEST(Gemma4Direct, TowerTensorsBesideTheTextModelAreSkipped) {
    const std::string base = test::temp_path("gemma4_ple_text.gguf");
    write_random_model(gemma4_ple_spec(68), nullptr, base);
    auto file = gguf::File::open(base);
    gguf::Writer w;
    for (const auto& [key, value] : file->metadata()) w.set(key, value);
    for (const auto& t : file->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    for (const char* name : {"v.patch_embd.weight", "a.conv1d.0.weight", "mm.input_projection.weight"})
        w.add_tensor(name, gguf::GgmlType::F32, {16, 4}, std::vector<uint8_t>(16 * 4 * 4, 0));
    const std::string path = test::temp_path("gemma4_ple_towers.gguf");
    w.write(path);
    const std::vector<int32_t> ids = prompt(7);
    EXPECT_EQ(reference_logits(path, ids), reference_logits(base, ids));
}

// gen-model writes its synthetic vocabulary in Gemma 4's tokenizer form: model "gemma4" with merges,
// loaded as such (hand-worked ids: <unk> <s> </s>, bytes 3..258, then "▁e" 259, "e" 260, "▁t" 261, ...).
TEST(Gemma4Model, GenModelWritesTheGemma4TokenizerModel) {
    const std::string path = test::temp_path("gemma4_tokenizer_model.gguf");
    write_random_model(gemma4_spec(91), nullptr, path);
    const auto file = gguf::File::open(path);
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "gemma4");
    EXPECT_EQ(file->get_strings("tokenizer.ggml.merges").front(), "\xE2\x96\x81 e");
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    EXPECT_EQ(tok->vocab().pre(), "gemma4");
    EXPECT_EQ(tok->encode(" eat"), (std::vector<int32_t>{1, 259, 264, 262}));  // <s> ▁e a t, no dummy prefix
    EXPECT_EQ(tok->encode("hat\nzq", {.add_bos = false}), (std::vector<int32_t>{274, 264, 262, 3 + '\n', 3 + 'z', 3 + 'q'}));
    for (std::string_view text : {" the cat\n\nsat  on", "caf\xC3\xA9 \xF0\x9F\x98\x80"})
        EXPECT_EQ(tok->decode(tok->encode(text)), text);
}

// --- the forms refused by name -------------------------------------------------------------------

// Rewrites the gen-model file with one metadata key changed (or a tensor added) and expects the load
// to fail naming `what`.
void expect_refused(const std::function<void(gguf::Writer&)>& edit, const std::string& what, const std::string& name,
                    bool vocabulary = false) {
    const std::string base = test::temp_path("gemma4_refuse_base.gguf");
    write_random_model(gemma4_spec(81, 0, false), nullptr, base);
    auto file = gguf::File::open(base);
    gguf::Writer w;
    for (const auto& [key, value] : file->metadata()) w.set(key, value);
    for (const auto& t : file->tensors())
        w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    edit(w);
    const std::string path = test::temp_path("gemma4_refuse_" + name + ".gguf");
    w.write(path);
    try {
        if (vocabulary) tokenizer::Vocab::from_gguf(*gguf::File::open(path));
        else open_step_model(path, {.backend = "reference", .tokens_wanted = 64});
        FAIL() << name << ": loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

TEST(Gemma4Refused, FormsThePagedKvOrGraphCannotRunAreNamed) {
    expect_refused([](gguf::Writer& w) { w.set("gemma4.attention.value_length_swa", gguf::Value::u32(8)); },
                   "sliding layers' key length 16 differs from their value length 8", "value_length");
    expect_refused([](gguf::Writer& w) {  // 2 and 3 KV heads: the paged KV cannot repeat 2 heads into 3
        std::vector<gguf::Value> kv(6, gguf::Value::u32(2));
        kv[2] = gguf::Value::u32(3);
        w.set("gemma4.attention.head_count_kv", gguf::Value::array(gguf::ValueType::u32, kv));
    }, "mixes 2 and 3 KV heads", "kv_heads");
    expect_refused([](gguf::Writer& w) { w.set("gemma4.embedding_length_per_layer_input", gguf::Value::u32(8)); },
                   "gemma4.embedding_length_per_layer_input = 8 but tensor per_layer_token_embd.weight is missing", "ple");
    expect_refused([](gguf::Writer& w) { w.add_tensor("per_layer_token_embd.weight", gguf::GgmlType::F32, {48, 300},
                                                       std::vector<uint8_t>(48 * 300 * 4, 0)); },
                   "tensor per_layer_token_embd.weight is present but gemma4.embedding_length_per_layer_input is 0",
                   "ple_table");
    expect_refused([](gguf::Writer& w) {
        w.set("gemma4.feed_forward_length", gguf::Value::array(gguf::ValueType::u32, std::vector<gguf::Value>(5, gguf::Value::u32(96))));
    }, "gemma4.feed_forward_length has 5 entries for 6 blocks", "ffn_length");
    expect_refused([](gguf::Writer& w) {
        std::vector<gguf::Value> ffn(6, gguf::Value::u32(96));
        ffn[3] = gguf::Value::u32(0);
        w.set("gemma4.feed_forward_length", gguf::Value::array(gguf::ValueType::u32, ffn));
    }, "gemma4.feed_forward_length[3] = 0 is out of range", "ffn_zero");
    expect_refused([](gguf::Writer& w) {  // widths that differ from the stored FFN tensors
        std::vector<gguf::Value> ffn(6, gguf::Value::u32(96));
        ffn[1] = gguf::Value::u32(128);
        w.set("gemma4.feed_forward_length", gguf::Value::array(gguf::ValueType::u32, ffn));
    }, "blk.1.ffn_gate.weight", "ffn_shape");
    expect_refused([](gguf::Writer& w) { w.set("gemma4.attention.shared_kv_layers", gguf::Value::u32(6)); },
                   "shared_kv_layers", "shared_all");
    expect_refused([](gguf::Writer& w) { w.add_tensor("blk.0.ffn_gate_inp.weight", gguf::GgmlType::F32, {64, 4},
                                                       std::vector<uint8_t>(64 * 4 * 4, 0)); },
                   "blk.0.ffn_gate_inp.weight is present but key gemma4.expert_count is missing", "experts");
    // Gemma 4's own tokenizer model loads (gemma4_tokenizer_test.cpp); a malformed merge is named.
    expect_refused([](gguf::Writer& w) { w.set("tokenizer.ggml.merges", gguf::Value::strings({"ab"})); },
                   "tokenizer.ggml.merges[0] = 'ab' is not of the form 'left right'", "tokenizer", true);
}
}  // namespace
}  // namespace pagoda::model
