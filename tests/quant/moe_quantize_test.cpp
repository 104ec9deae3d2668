// `pagoda quantize` on a mixture-of-experts model: the 3-D expert stacks are quantised row by row
// like any matrix (and take the q4_k_m mix's ffn_down rule), the router keeps its F32, and the
// result loads and runs.
#include <cmath>
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

TEST(MoeQuantize, ExpertStacksFollowTheRulesAndTheRouterIsKept) {
    model::RandomModelSpec spec;
    spec.dim = 256; spec.n_heads = 4; spec.n_kv_heads = 2; spec.vocab_size = 300;
    spec.n_experts = 4; spec.n_experts_used = 2; spec.expert_ffn_dim = 256; spec.seed = 3;
    const std::string f32 = test::temp_path("moe_quant_f32.gguf"), out = test::temp_path("moe_quant_q4_k_m.gguf");
    model::write_random_model(spec, nullptr, f32);
    QuantizeRequest req;
    req.input = f32;
    req.output = out;
    req.target = "q4_k_m";
    ThreadPool pool(2);
    const QuantizeReport report = quantize_model(req, pool);
    auto file = gguf::File::open(out);
    auto type = [&](const std::string& name) { return file->find_tensor(name)->type; };
    // 2 layers: the q4_k_m "more bits" rule takes the last eighth, layer 1.
    EXPECT_EQ(type("blk.0.ffn_gate_exps.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type("blk.0.ffn_up_exps.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type("blk.0.ffn_down_exps.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type("blk.1.ffn_down_exps.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type("blk.0.ffn_gate_inp.weight"), GgmlType::F32);
    EXPECT_EQ(file->find_tensor("blk.1.ffn_up_exps.weight")->shape, (std::vector<int64_t>{256, 256, 4}));
    bool router_rule = false;
    for (const auto& t : report.tensors) router_rule = router_rule || (t.name == "blk.1.ffn_gate_inp.weight" &&
                                                                      t.rule == "expert router: kept");
    EXPECT_TRUE(router_rule);
    auto m = model::open_step_model(out, {.threads = 2, .tokens_wanted = 16});
    model::SequenceRunner runner(*m, false);
    const auto logits = runner.prefill(0, std::vector<int32_t>{4, 8, 15, 16, 23, 42});
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace pagoda::quant
