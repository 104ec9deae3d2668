// LoRA adapters through the engine (issue 47): requests of different adapters and of none run in the
// same steps and each gets the tokens it gets alone; the prefix cache never serves a prompt's KV
// across adapters or scales (usage.cached_prompt_tokens counts the hits), only to the same adapter.
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

struct Files {
    std::string model, a, b;
};

const Files& files() {
    static const Files f = [] {
        Files f{pagoda::test::temp_path("lora-engine.gguf"), pagoda::test::temp_path("lora-engine-a.gguf"),
                pagoda::test::temp_path("lora-engine-b.gguf")};
        model::RandomModelSpec spec;
        spec.vocab_size = 300;
        spec.seed = 12;
        model::write_random_model(spec, nullptr, f.model);
        auto base = gguf::File::open(f.model);
        lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 31}, f.a, "");
        lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 32}, f.b, "");
        return f;
    }();
    return f;
}

std::unique_ptr<model::StepModel> open_model() {
    return model::open_step_model(files().model, {.threads = 1, .kv = {.block_size = 16}, .tokens_wanted = 1024,
                                                  .max_step_tokens = 256, .lora = true});
}

std::vector<int32_t> prompt() {
    std::vector<int32_t> p;
    for (int i = 0; i < 40; ++i) p.push_back(1 + (i * 7) % 290);
    return p;
}

Request with_lora(lora::AdapterRef ref) {
    Request r = test::greedy_request(prompt(), 8);
    r.lora = std::move(ref);
    return r;
}

TEST(LoraEngine, PrefixCacheIsKeyedByAdapterAndScale) {
    auto model = open_model();
    auto a = model->load_lora(files().a, "a", 1);
    auto b = model->load_lora(files().b, "b", 1);
    EngineCore core(*model, nullptr, {});
    auto cached = [&](lora::AdapterRef ref) {
        test::Driver driver(core);
        const RequestId id = driver.add(with_lora(std::move(ref)));
        driver.run();
        EXPECT_TRUE(driver.results[id].done);
        return driver.results[id].usage.cached_prompt_tokens;
    };
    EXPECT_EQ(cached({a, 1}), 0);
    EXPECT_EQ(cached({b, 1}), 0) << "adapter b was served adapter a's KV";
    EXPECT_EQ(cached({}), 0) << "the base model was served an adapter's KV";
    EXPECT_EQ(cached({a, 0.5f}), 0) << "another scale was served adapter a's KV";
    EXPECT_EQ(cached({a, 1}), 32) << "the same adapter and scale reuse their 2 full blocks";
    EXPECT_EQ(cached({}), 32) << "the base model reuses its own";
}

TEST(LoraEngine, MixedStepsGiveEachRequestItsTokensAlone) {
    auto model = open_model();
    const std::vector<lora::AdapterRef> refs = {{model->load_lora(files().a, "a", 1), 1},
                                                {},
                                                {model->load_lora(files().b, "b", 1), 1},
                                                {model->load_lora(files().a, "a2", 1), 0.5f}};
    std::vector<std::vector<int32_t>> alone;
    for (const auto& ref : refs) {
        EngineCore core(*model, nullptr, {.prefix_caching = false});
        test::Driver driver(core);
        const RequestId id = driver.add(with_lora(ref));
        driver.run();
        alone.push_back(driver.results[id].choices.at(0).tokens);
    }
    EngineCore core(*model, nullptr, {.prefix_caching = false});
    test::Driver driver(core);
    std::vector<RequestId> ids;
    for (const auto& ref : refs) ids.push_back(driver.add(with_lora(ref)));
    driver.run();
    for (size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(driver.results[ids[i]].choices.at(0).tokens, alone[i]) << i;
    EXPECT_NE(alone[0], alone[1]);
    EXPECT_NE(alone[0], alone[2]);
    EXPECT_NE(alone[1], alone[3]);
}

}  // namespace
}  // namespace pagoda::engine
