// LoRA steps keep the fused ops (issue 47): the fusion pass folds the lora_add nodes that follow the
// QKV and gate|up matmuls of the LoRA twin graph into qkv_rope_kv_write and matmul_silu_mul on a
// backend that fuses_lora() (and leaves them where the backend does not), and a
// model's LoRA steps give bitwise the logits of the unfused twin graph on the CPU backend — mixed
// batches of two adapters, a scale and base rows, prefill and decode, f32 and quantised weights.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "model/fusion.h"
#include "model/lora_graph.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

struct NamedParts : backend::Weight {
    explicit NamedParts(const std::vector<std::string>& names) : Weight(parts_of(names)) {}
    static std::vector<backend::MatrixSource> parts_of(const std::vector<std::string>& names) {
        std::vector<backend::MatrixSource> parts;
        for (const auto& n : names) parts.push_back({.rows = 8, .cols = 8, .name = n});
        return parts;
    }
};

// One layer's QKV + RoPE + K/V write, gate|up + SiLU and down projection, as the llama builder
// writes them (no norm: the quantised-input pass has nothing to do).
Graph layer_graph(const backend::Weight& qkv, const backend::Weight& gate_up, const backend::Weight& down) {
    Graph g;
    const int h = g.add_tensor("h", Rows::tokens, 8), q = g.add_tensor("q", Rows::tokens, 8),
              k = g.add_tensor("k", Rows::tokens, 8), v = g.add_tensor("v", Rows::tokens, 8),
              gate = g.add_tensor("g", Rows::tokens, 8), up = g.add_tensor("u", Rows::tokens, 8),
              act = g.add_tensor("a", Rows::tokens, 8), y = g.add_tensor("y", Rows::tokens, 8);
    auto node = [&](OpKind kind, std::vector<int> in, std::vector<int> out, const backend::Weight* w = nullptr) {
        Node n;
        n.kind = kind;
        n.in = std::move(in);
        n.out = std::move(out);
        n.weight = w;
        n.layer = 0;
        n.n_heads = 2;
        n.head_dim = 4;
        g.nodes.push_back(n);
    };
    node(OpKind::matmul, {h}, {q, k, v}, &qkv);
    node(OpKind::rope, {q}, {q});
    node(OpKind::rope, {k}, {k});
    node(OpKind::kv_write, {k, v}, {});
    node(OpKind::matmul, {h}, {gate, up}, &gate_up);
    node(OpKind::silu_mul, {gate, up}, {act});
    node(OpKind::matmul, {act}, {y}, &down);
    g.hidden = y;
    return g;
}

TEST(LoraFusion, FoldsTheUpdatesIntoTheFusedOpsWhereTheBackendTakesThem) {
    const NamedParts qkv({"q.weight", "k.weight", "v.weight"}), gate_up({"gate.weight", "up.weight"}), down({"down.weight"});
    const Graph twin = with_lora_nodes(layer_graph(qkv, gate_up, down));
    ASSERT_EQ(twin.lora_targets,
              (std::vector<std::string>{"q.weight", "k.weight", "v.weight", "gate.weight", "up.weight", "down.weight"}));
    EXPECT_EQ(twin.op_counts(), "kv_write 1, lora_add 6, matmul 3, rope 2, silu_mul 1");

    auto cpu = backend::make_backend("cpu", {.n_threads = 1});
    ASSERT_TRUE(cpu->fuses_lora());
    const Graph fused = fuse(twin, *cpu);
    EXPECT_EQ(fused.op_counts(), "lora_add 1, matmul 1, matmul_silu_mul 1, qkv_rope_kv_write 1");
    ASSERT_EQ(fused.nodes.size(), 4u);
    EXPECT_EQ(fused.nodes[0].kind, OpKind::qkv_rope_kv_write);
    EXPECT_EQ(fused.nodes[0].lora_parts, (std::array<int32_t, 3>{0, 1, 2}));
    EXPECT_EQ(fused.nodes[1].kind, OpKind::matmul_silu_mul);
    EXPECT_EQ(fused.nodes[1].lora_parts, (std::array<int32_t, 3>{3, 4, -1}));
    EXPECT_EQ(fused.nodes[3].kind, OpKind::lora_add);  // the down projection's, after its matmul
    EXPECT_EQ(fused.nodes[3].lora_target, 5);

    // The plain graph fuses the same ops, with no updates in them.
    const Graph plain = fuse(layer_graph(qkv, gate_up, down), *cpu);
    EXPECT_EQ(plain.op_counts(), "matmul 1, matmul_silu_mul 1, qkv_rope_kv_write 1");
    for (const Node& n : plain.nodes) EXPECT_EQ(n.lora_parts, (std::array<int32_t, 3>{-1, -1, -1}));

    // A backend without fused ops keeps the twin as it is.
    auto reference = backend::make_backend("reference");
    ASSERT_FALSE(reference->fuses_lora());
    EXPECT_EQ(fuse(twin, *reference).op_counts(), twin.op_counts());
}

std::string model_path(const std::string& type) {
    RandomModelSpec s;
    s.n_layers = 2; s.dim = 256; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 512; s.vocab_size = 300; s.seed = 21;
    const std::string f32 = test::temp_path("lora-fusion-f32.gguf");
    write_random_model(s, nullptr, f32);
    if (type == "f32") return f32;
    const std::string out = test::temp_path("lora-fusion-" + type + ".gguf");
    quant::QuantizeRequest req;
    req.input = f32;
    req.output = out;
    req.target = type;
    req.plain = true;
    ThreadPool pool(2);
    quant::quantize_model(req, pool);
    return out;
}

// Logits of a prefill of four sequences (adapter a, none, adapter b, adapter a at 0.5) and then a
// decode step of each, in one batch each time.
std::vector<float> mixed_logits(const std::string& path, const std::string& adapter_a, const std::string& adapter_b,
                                bool fusion) {
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 128, .fusion = fusion, .lora = true});
    auto a = model->load_lora(adapter_a, "a", 1);
    auto b = model->load_lora(adapter_b, "b", 1);
    const std::vector<lora::AdapterRef> refs = {{a, 1.0f}, {}, {b, 1.0f}, {a, 0.5f}};
    const int32_t block = model->info().block_size, n_prompt = 11;
    std::vector<float> logits;
    for (int32_t step = 0; step < 2; ++step) {
        Batch batch;
        for (size_t i = 0; i < refs.size(); ++i) {
            std::vector<int32_t> table;
            for (int32_t j = 0; j < 4; ++j) table.push_back(int32_t(i) * 4 + j);
            const int32_t s = batch.add_sequence(table, refs[i]);
            const int32_t from = step == 0 ? 0 : n_prompt, to = step == 0 ? n_prompt : n_prompt + 1;
            for (int32_t p = from; p < to; ++p)
                batch.add((p * 37 + int32_t(i) * 11 + 3) % 300, p, s, int64_t(table[size_t(p / block)]) * block + p % block, true);
        }
        const std::vector<float> out = model->forward(batch);
        logits.insert(logits.end(), out.begin(), out.end());
    }
    return logits;
}

class LoraFusedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraFusedModel, GivesBitwiseTheLogitsOfTheUnfusedTwin) {
    const std::string path = model_path(GetParam());
    auto base = gguf::File::open(model_path("f32"));
    const std::string a = test::temp_path("lora-fusion-a.gguf"), b = test::temp_path("lora-fusion-b.gguf");
    lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 31}, a, "");
    lora::write_random_adapter(*base, {.rank = 4, .alpha = 4, .seed = 32, .type = gguf::GgmlType::F16,
                                       .modules = {"attn_q", "attn_v", "ffn_up", "ffn_down"}}, b, "");
    auto cpu = backend::make_backend("cpu");
    ASSERT_TRUE(cpu->fused_bitwise());
    const std::vector<float> fused = mixed_logits(path, a, b, true), unfused = mixed_logits(path, a, b, false);
    ASSERT_EQ(fused.size(), unfused.size());
    EXPECT_TRUE(fused == unfused) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Types, LoraFusedModel, ::testing::Values("f32", "q8_0", "q4_k_m"));

}  // namespace
}  // namespace pagoda::model
