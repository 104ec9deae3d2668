// Mixture-of-experts models end to end: llama with experts (Mixtral style), qwen2moe (a gated shared
// expert, no renormalisation) and qwen3moe (Q/K norms), as gen-model writes them with llama.cpp's
// tensor names and keys. The CPU backend's logits against the reference backend's, as one prefill
// and token by token, at F32, F16 and quantised expert types, fused and unfused; and load errors
// naming a missing expert tensor or key.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "model_compare.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

using gguf_edit::without;
using gguf_edit::load_error;

struct Case {
    std::string name;
    RandomModelSpec spec;
    std::string quant;  // "" (the spec's float type) or a `pagoda quantize` target
    double tolerance;   // max |cpu - reference| relative to the largest |reference logit|
    bool fusion = true;
};

RandomModelSpec moe_spec(const std::string& arch, int64_t dim, uint64_t seed) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 2; s.dim = dim; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300;
    s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = dim; s.seed = seed;
    if (arch != "llama") s.rope_theta = 1e6f;
    if (arch == "qwen3moe") s.head_dim = 16;
    if (arch == "qwen2moe") s.shared_expert_ffn_dim = dim / 2;
    return s;
}

std::vector<Case> cases() {
    std::vector<Case> out;
    out.push_back({"llama_moe_f32", moe_spec("llama", 64, 31), "", 1e-5});
    {
        Case c{"llama_moe_f16", moe_spec("llama", 64, 32), "", 1e-4};
        c.spec.type = gguf::GgmlType::F16;
        out.push_back(c);
    }
    // Quantised: the cpu's packed int8 paths quantise activations to int8 per 32 values, where the
    // reference multiplies the same stored weights in doubles.
    out.push_back({"llama_moe_q8_0", moe_spec("llama", 64, 33), "q8_0", 3e-2});
    out.push_back({"qwen2moe_f32", moe_spec("qwen2moe", 64, 34), "", 1e-5});
    {
        Case c{"qwen2moe_f16", moe_spec("qwen2moe", 64, 39), "", 1e-4};
        c.spec.type = gguf::GgmlType::F16;
        out.push_back(c);
    }
    out.push_back({"qwen2moe_q4_0", moe_spec("qwen2moe", 64, 35), "q4_0", 3e-2});
    out.push_back({"qwen3moe_f32", moe_spec("qwen3moe", 64, 36), "", 1e-5});
    {
        Case c{"qwen3moe_f16", moe_spec("qwen3moe", 64, 37), "", 1e-4};
        c.spec.type = gguf::GgmlType::F16;
        out.push_back(c);
    }
    out.push_back({"qwen3moe_q4_k", moe_spec("qwen3moe", 256, 38), "q4_k", 3e-2});
    const size_t fused = out.size();
    for (size_t i = 0; i < fused; ++i) {
        Case c = out[i];
        c.name += "_unfused";
        c.fusion = false;
        out.push_back(c);
    }
    return out;
}

std::string model_path(const Case& c) {
    const std::string base = c.name.substr(0, c.name.find("_unfused"));
    return model_compare::write_model(c.spec, "moe_" + base, c.quant);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MoeModel : public ::testing::TestWithParam<Case> {};

TEST_P(MoeModel, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    // Exact f32 products for F16 weights too (bf16_dot, the default on AVX512_BF16 CPUs, rounds the
    // activations to bf16: reference_model_test covers that path's looser bound).
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(model_path(c)));
    const ModelConfig cfg = read_config(*file);
    ASSERT_EQ(cfg.n_experts, 4);
    ASSERT_EQ(cfg.n_experts_used, 2);
    EXPECT_EQ(cfg.expert_weights_norm, c.spec.arch != "qwen2moe");
    EXPECT_EQ(cfg.shared_expert_ffn_dim, c.spec.arch == "qwen2moe" ? c.spec.dim / 2 : 0);
    if (!c.quant.empty()) {  // the experts themselves are quantised; the router is kept
        EXPECT_NE(file->find_tensor("blk.0.ffn_up_exps.weight")->type, gguf::GgmlType::F32);
        EXPECT_EQ(file->find_tensor("blk.0.ffn_gate_inp.weight")->type, gguf::GgmlType::F32);
    }
    model_compare::expect_cpu_matches_reference(file, c.fusion, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, MoeModel, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(MoeModelErrors, NameTheMissingExpertTensorOrKey) {
    const std::string full = test::temp_path("moe_errors.gguf");
    write_random_model(moe_spec("qwen2moe", 64, 40), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    const std::string cut = test::temp_path("moe_errors_cut.gguf");
    for (const std::string drop : {"blk.1.ffn_up_exps.weight", "blk.0.ffn_gate_inp.weight", "blk.1.ffn_down_shexp.weight",
                                   "blk.0.ffn_gate_inp_shexp.weight"}) {
        without(full, cut, drop);
        EXPECT_NE(load_error(cut).find("tensor " + drop + " is missing"), std::string::npos) << load_error(cut);
    }
    without(full, cut, "qwen2moe.expert_used_count");
    EXPECT_NE(load_error(cut).find("qwen2moe.expert_used_count is missing"), std::string::npos) << load_error(cut);
    without(full, cut, "qwen2moe.expert_count");
    EXPECT_NE(load_error(cut).find("qwen2moe.expert_count"), std::string::npos) << load_error(cut);
}

TEST(MoeModelErrors, RefuseExpertsOnAMisshapenStack) {
    const std::string full = test::temp_path("moe_shape.gguf");
    write_random_model(moe_spec("llama", 64, 41), nullptr, full);
    auto in = gguf::File::open(full);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata())
        w.set(key, key == "llama.expert_count" ? gguf::Value::u32(8) : value);  // the file stacks 4
    for (const auto& t : in->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    const std::string bad = test::temp_path("moe_shape_bad.gguf");
    w.write(bad);
    EXPECT_NE(load_error(bad).find("blk.0.ffn_gate_inp.weight has shape [64, 4], expected [64, 8]"), std::string::npos)
        << load_error(bad);
}

// Older Mixtral conversions: one 2-D tensor per expert (blk.N.ffn_gate.E.weight). The same
// weights split that way give bitwise the logits of the stacked file.
TEST(MoeModelLayouts, PerExpertTensorsLoadLikeTheStack) {
    const std::string stacked = test::temp_path("moe_stacked.gguf");
    write_random_model(moe_spec("llama", 64, 42), nullptr, stacked);
    auto in = gguf::File::open(stacked);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    for (const auto& t : in->tensors()) {
        if (t.shape.size() != 3) {
            w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
            continue;
        }
        const std::string stem = t.name.substr(0, t.name.size() - std::string("_exps.weight").size());
        const uint64_t slice = t.n_bytes / uint64_t(t.shape[2]);
        for (int64_t e = 0; e < t.shape[2]; ++e)
            w.add_tensor(stem + "." + std::to_string(e) + ".weight", t.type, {t.shape[0], t.shape[1]},
                         t.data + uint64_t(e) * slice, slice);
    }
    const std::string legacy = test::temp_path("moe_legacy.gguf");
    w.write(legacy);
    ASSERT_EQ(gguf::File::open(legacy)->find_tensor("blk.0.ffn_gate_exps.weight"), nullptr);
    auto logits = [](const std::string& path) {
        auto model = open_step_model(path, {.threads = 2, .tokens_wanted = 32});
        SequenceRunner runner(*model, false);
        std::vector<int32_t> ids = {5, 17, 99, 3, 250, 41};
        auto out = runner.prefill(0, ids, 32, true);
        const auto next = runner.decode(0, 7);
        out.insert(out.end(), next.begin(), next.end());
        return out;
    };
    EXPECT_EQ(logits(stacked), logits(legacy));
    without(legacy, test::temp_path("moe_legacy_cut.gguf"), "blk.1.ffn_down.3.weight");
    EXPECT_NE(load_error(test::temp_path("moe_legacy_cut.gguf")).find("tensor blk.1.ffn_down.3.weight is missing"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
