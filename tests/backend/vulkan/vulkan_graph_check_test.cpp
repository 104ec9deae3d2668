// The check before a model runs (model/graph_check.h, Backend::refusal) on the Vulkan backend: a
// model the reference backend runs and Vulkan cannot (Gemma 4's per-expert output scales, which the
// device router lacks) is refused when it opens, naming what Vulkan lacks, the op, its layer, the
// tensor and the backend; and the refusal answers per op and parameters.
#include <gtest/gtest.h>
#include <string>

#include "backend/backend.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

TEST(VulkanGraphCheck, RefusalAnswersPerOpAndParameters) {
    PAGODA_REQUIRE_VULKAN();
    auto vulkan = backend::make_backend("vulkan");
    backend::MoeOp moe;
    moe.routing.expert_scale = {0.5f, 2.0f};
    EXPECT_EQ(vulkan->refusal({.op = backend::OpKind::moe_ffn, .moe = &moe}),
              "moe_ffn's per-expert output scales (gemma4's ffn_down_exps.scale)");
    moe.routing.expert_scale.clear();
    EXPECT_EQ(vulkan->refusal({.op = backend::OpKind::moe_ffn, .moe = &moe}), "");
    EXPECT_EQ(vulkan->refusal({.op = backend::OpKind::qkv_rope_kv_write}), "");
    EXPECT_EQ(vulkan->refusal({.op = backend::OpKind::matmul_silu_mul}), "");
}

TEST(VulkanGraphCheck, RefusesGemma4sExpertScalesWhenTheModelOpensNamingTheLayer) {
    PAGODA_REQUIRE_VULKAN();
    RandomModelSpec s;  // gemma4 with 26B-A4B-style experts beside the dense FFN (ffn_down_exps.scale)
    s.arch = "gemma4";
    s.n_layers = 6; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 96; s.vocab_size = 300;
    s.full_head_dim = 32; s.full_kv_heads = 1; s.sliding_window = 5; s.swa_period = 3; s.shared_kv_layers = 2;
    s.v_equals_k = true; s.final_softcap = 30.0f;
    s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 48; s.seed = 5;
    const std::string path = test::temp_path("vulkan-graph-check-gemma4.gguf");
    write_random_model(s, nullptr, path);
    const StepModelOptions options{.kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64};
    StepModelOptions reference = options, vulkan = options;
    reference.backend = "reference";
    vulkan.backend = "vulkan";
    EXPECT_NO_THROW(open_step_model(path, reference)) << "the reference runs the experts' scales";
    try {
        open_step_model(path, vulkan);
        FAIL() << "vulkan opened a model whose experts carry per-expert output scales";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("the vulkan backend cannot run moe_ffn's per-expert output scales (gemma4's "
                         "ffn_down_exps.scale) (the moe_ffn of layer 0, writing blk.0."),
                  std::string::npos)
            << m;
    }
}

}  // namespace
}  // namespace pagoda::model
