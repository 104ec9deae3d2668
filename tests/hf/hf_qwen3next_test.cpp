// Qwen3-Next Hugging Face folders (Qwen3NextForCausalLM) against the GGUF of the same random model:
// the config maps to the keys llama.cpp's converter writes (no M-RoPE sections, the MoE keys), and
// the folder's fused in_proj_qkvz / in_proj_ba hold, per key head, the rows the split GGUF form keeps
// apart (q, k, the group's v, the group's z; the group's beta, then its alpha), checked against the
// split attn_qkv / attn_gate / ssm_ba directly, not only through the writer's inverse. (HfEquivalence
// checks the whole folder byte for byte and its logits bitwise.)
#include <cmath>
#include <cstring>
#include <map>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/safetensors.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

const char* kQwen3Next = R"({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
    "hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "intermediate_size": 5120, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
    "attention_bias": false, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "full_attention_interval": 4,
    "partial_rotary_factor": 0.25, "rope_theta": 10000000, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
    "decoder_sparse_step": 1, "mlp_only_layers": []})";

TEST(HfQwen3Next, ConfigMapsToTheConvertersKeys) {
    const auto m = hf::read_hf_config(kQwen3Next, "config.json");
    EXPECT_EQ(m.arch, "qwen3next");
    EXPECT_TRUE(m.norm_plus_one);
    EXPECT_FALSE(m.permute_qk);
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : m.metadata) got[key] = value.to_display();
    for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
             {"qwen3next.ssm.conv_kernel", "4"}, {"qwen3next.ssm.state_size", "128"}, {"qwen3next.ssm.group_count", "16"},
             {"qwen3next.ssm.time_step_rank", "32"}, {"qwen3next.ssm.inner_size", "4096"},
             {"qwen3next.full_attention_interval", "4"}, {"qwen3next.rope.dimension_count", "64"},
             {"qwen3next.attention.key_length", "256"}, {"qwen3next.expert_count", "512"},
             {"qwen3next.expert_used_count", "10"}, {"qwen3next.expert_feed_forward_length", "512"},
             {"qwen3next.expert_shared_feed_forward_length", "512"}, {"qwen3next.block_count", "8"}}) {
        ASSERT_TRUE(got.count(key)) << key;
        EXPECT_EQ(got.at(key), want) << key;
    }
    ASSERT_TRUE(got.count("qwen3next.rope.freq_base"));
    EXPECT_EQ(std::stod(got.at("qwen3next.rope.freq_base")), 1e7);
    EXPECT_EQ(got.count("qwen3next.rope.dimension_sections"), 0u) << "Qwen3-Next has no M-RoPE";
}

TEST(HfQwen3Next, FusedProjectionsHoldTheSplitRowsPerKeyHead) {
    RandomModelSpec s;
    s.arch = "qwen3next"; s.n_layers = 4; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300;
    s.head_dim = 16; s.seed = 11; s.context_length = 256;
    s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.shared_expert_ffn_dim = 24;
    const std::string gguf_path = test::temp_path("hf-q3n-split.gguf"), dir = test::temp_path("hf-q3n-layout");
    write_random_model(s, nullptr, gguf_path);  // the split form: attn_qkv + attn_gate, same weights
    write_random_model_hf(s, dir);
    auto g = gguf::File::open(gguf_path);
    auto st = hf::SafetensorsFile::open(dir + "/model.safetensors");
    const int64_t nk = 2, nv = 6, r = 3, hd = 16, key_dim = nk * hd, group_rows = 2 * hd + 2 * r * hd;
    const auto* qkvz = st->find("model.layers.0.linear_attn.in_proj_qkvz.weight");
    const auto* ba = st->find("model.layers.0.linear_attn.in_proj_ba.weight");
    ASSERT_TRUE(qkvz && ba);
    EXPECT_EQ(st->find("model.layers.0.linear_attn.in_proj_qkv.weight"), nullptr);
    EXPECT_EQ(qkvz->shape, (std::vector<int64_t>{nk * group_rows, 48}));
    EXPECT_EQ(ba->shape, (std::vector<int64_t>{2 * nv, 48}));
    const uint64_t row = 48 * 4;  // bytes of one row of a [*, hidden] matrix
    const uint8_t* qkv = g->find_tensor("blk.0.attn_qkv.weight")->data;
    const uint8_t* z = g->find_tensor("blk.0.attn_gate.weight")->data;
    const uint8_t* split_ba = g->find_tensor("blk.0.ssm_ba.weight")->data;
    for (int64_t k = 0; k < nk; ++k) {
        SCOPED_TRACE(fmt::format("key head {}", k));
        const uint8_t* group = qkvz->data + k * group_rows * row;
        EXPECT_EQ(std::memcmp(group, qkv + k * hd * row, hd * row), 0) << "q";
        EXPECT_EQ(std::memcmp(group + hd * row, qkv + (key_dim + k * hd) * row, hd * row), 0) << "k";
        EXPECT_EQ(std::memcmp(group + 2 * hd * row, qkv + (2 * key_dim + k * r * hd) * row, r * hd * row), 0) << "v";
        EXPECT_EQ(std::memcmp(group + (2 + r) * hd * row, z + k * r * hd * row, r * hd * row), 0) << "z";
    }
    EXPECT_EQ(std::memcmp(ba->data, split_ba, 2 * nv * row), 0) << "in_proj_ba is ssm_ba as it is";
}

}  // namespace
}  // namespace pagoda::model
