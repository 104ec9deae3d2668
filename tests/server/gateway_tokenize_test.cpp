// The gateway's /tokenize and /detokenize: 503 while the model loads, the loaded tokenizer's ids
// after; and a chat request with tools on a template that cannot render them is refused.
#include <filesystem>
#include <future>
#include <gtest/gtest.h>

#include "engine/fake_step_model.h"
#include "server/gateway.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

std::shared_ptr<const tokenizer::Tokenizer> stories_tokenizer() {
    const std::string path = test::vocab_path("stories260K");
    if (!std::filesystem::exists(path)) return nullptr;
    return tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
}

LoadedModel fake(std::shared_ptr<const tokenizer::Tokenizer> tok, engine::EngineOptions o, std::string tmpl) {
    LoadedModel m;
    m.engine = std::make_unique<engine::Engine>(std::make_unique<engine::test::FakeStepModel>(tok->n_vocab(), 64, 16, 1024),
                                                tok, std::move(o));
    m.chat_template = std::move(tmpl);
    return m;
}

}  // namespace

TEST(GatewayTokenize, LoadingThenTheModelsTokenizer) {
    auto tok = stories_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture stories260K is absent";
    std::promise<void> release;
    auto released = release.get_future().share();
    GatewayOptions opts;
    opts.model_name = "m";
    Gateway gw(opts, {}, [&](engine::EngineOptions o) {
        released.wait();
        return fake(tok, std::move(o), "{% for m in messages %}{{ m.content }}{% endfor %}");
    });
    auto loading = std::async(std::launch::async, [&] { gw.load(); });
    try {
        gw.tokenize(json{{"content", "hi"}});
        ADD_FAILURE() << "tokenize answered while loading";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 503);
        EXPECT_EQ(e.code, "model_loading");
    }
    release.set_value();
    loading.get();
    const SimpleResponse r = gw.tokenize(json{{"content", "Once upon a time"}});
    EXPECT_EQ(r.status, 200);
    const json ids = json::parse(r.body)["tokens"];
    EXPECT_EQ(ids.get<std::vector<int32_t>>(), tok->encode("Once upon a time", {.add_bos = false, .add_eos = false}));
    EXPECT_EQ(json::parse(gw.detokenize(json{{"tokens", ids}}).body)["content"], "Once upon a time");
    EXPECT_THROW(gw.detokenize(json{{"tokens", {-3}}}), ApiError);

    // This template has no tool syntax: tools would silently vanish from the prompt, so 400.
    const json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                       {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}};
    try {
        gw.start(Endpoint::chat_completions, body, nullptr, gw.new_request_id(), [](size_t, const engine::Delta&) {});
        ADD_FAILURE() << "tools accepted on a template without tool syntax";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "tools");
    }
    gw.stop_engine();
}
