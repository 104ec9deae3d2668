// /v1/responses through the gateway over a scripted fake model: a Responses request renders the
// very prompt the equivalent chat request does (the same template, the same pipeline), a
// previous_response_id continuation renders the whole stored conversation, and the store's 404s
// (never stored, store false, evicted by the cap, deleted) name the id.
#include <condition_variable>
#include <filesystem>
#include <gtest/gtest.h>
#include <mutex>

#include "engine/fake_step_model.h"
#include "server/gateway.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

std::shared_ptr<const tokenizer::Tokenizer> load_tokenizer() {
    const std::string path = test::vocab_path("stories260K");
    if (!std::filesystem::exists(path)) return nullptr;
    return tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
}

struct Collector {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::pair<size_t, engine::Delta>> deltas;
    bool done = false;
    DeltaSink sink() {
        return [this](size_t sub, const engine::Delta& d) {
            std::lock_guard lock(mutex);
            deltas.emplace_back(sub, d);
            if (d.request_done) done = true;
            cv.notify_all();
        };
    }
};

class GatewayResponses : public ::testing::Test {
protected:
    void SetUp() override {
        tok_ = load_tokenizer();
        if (!tok_) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    }

    std::unique_ptr<Gateway> gateway(size_t responses_max = 10) {
        GatewayOptions o;
        o.model_name = "fake-model";
        o.scheduler.max_seqs = 2;
        o.scheduler.max_batched_tokens = 256;
        o.chat_template = "chatml";  // renders tools and tool calls (Hermes)
        o.responses_max = responses_max;
        auto gw = std::make_unique<Gateway>(o, ApiKeyTable{}, [tok = tok_](engine::EngineOptions eo) {
            LoadedModel m;
            m.engine = std::make_unique<engine::Engine>(
                std::make_unique<engine::test::FakeStepModel>(tok->n_vocab(), 64, 16, 1024), tok, std::move(eo));
            m.description = "fake";
            return m;
        });
        gw->load();
        return gw;
    }

    // Runs a request to its end; returns {the response body, the streamed events or chunks}.
    std::pair<json, std::vector<json>> run(Gateway& gw, Endpoint endpoint, const nlohmann::ordered_json& body) {
        Collector c;
        auto job = gw.start(endpoint, body, nullptr, gw.new_request_id(), c.sink());
        std::vector<json> chunks = job->opening_chunks();
        {
            std::unique_lock lock(c.mutex);
            EXPECT_TRUE(c.cv.wait_for(lock, std::chrono::seconds(20), [&] { return c.done; }));
        }
        for (auto& [sub, d] : c.deltas)
            for (json& chunk : job->add(sub, d)) chunks.push_back(std::move(chunk));
        EXPECT_TRUE(job->done());
        json response = job->response();
        job->finish(200);
        return {response, chunks};
    }

    static ApiError error_of(const std::function<void()>& f) {
        try {
            f();
        } catch (const ApiError& e) {
            return e;
        }
        ADD_FAILURE() << "not refused";
        return ApiError::internal("not refused");
    }

    std::shared_ptr<const tokenizer::Tokenizer> tok_;
};

const json kTools = json::parse(R"([{"type":"function","name":"add","parameters":{"type":"object",
    "properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}])");

}  // namespace

TEST_F(GatewayResponses, RendersThePromptTheEquivalentChatRequestRenders) {
    auto gw = gateway();
    const json items = json::parse(R"([{"role":"user","content":"Once upon"},
        {"type":"function_call","call_id":"c1","name":"add","arguments":"{\"a\":1}"},
        {"type":"function_call_output","call_id":"c1","output":"2"}])");
    const auto [r, events] = run(*gw, Endpoint::responses,
                                 {{"input", items}, {"instructions", "Be brief."}, {"tools", kTools},
                                  {"max_output_tokens", 3}, {"temperature", 0}, {"store", false}});
    // As a client sends it: each tool {"type", "function"} in that order (the template shows the
    // keys as sent), its parameters those of kTools.
    nlohmann::ordered_json chat_body = nlohmann::ordered_json::parse(R"({"messages":[{"role":"system","content":"Be brief."},
        {"role":"user","content":"Once upon"},
        {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":1}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"2","name":"add"}],
        "tools":[{"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"}},
        "required":["a"],"additionalProperties":false}}}],"max_tokens":3,"temperature":0})");
    chat_body["tools"][0]["function"]["parameters"] = kTools[0]["parameters"];
    const auto [chat, chunks] = run(*gw, Endpoint::chat_completions, chat_body);
    EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    EXPECT_GT(r["usage"]["input_tokens"], 20);
    // Greedy on the same prompt: the same text.
    const std::string chat_text = chat["choices"][0]["message"]["content"].is_string()
                                      ? chat["choices"][0]["message"]["content"].get<std::string>()
                                      : "";
    std::string text;
    for (const json& item : r["output"])
        if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
    EXPECT_EQ(text, chat_text);
    EXPECT_EQ(r["object"], "response");
    EXPECT_EQ(r["model"], "fake-model");
    // Events: created, in_progress, ..., and the last carries the same response object.
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events[0]["type"], "response.created");
    EXPECT_EQ(events[1]["type"], "response.in_progress");
    EXPECT_TRUE(events.back()["type"] == "response.completed" || events.back()["type"] == "response.incomplete");
    EXPECT_EQ(events.back()["response"], r);
    // store false: nothing to retrieve.
    EXPECT_EQ(error_of([&] { gw->stored_response(r["id"]); }).status, 404);
}

TEST_F(GatewayResponses, AContinuationRendersTheWholeStoredConversation) {
    auto gw = gateway();
    const auto [first, e1] = run(*gw, Endpoint::responses, {{"input", "Once upon"}, {"max_output_tokens", 4}, {"temperature", 0}});
    const auto [second, e2] = run(*gw, Endpoint::responses,
                                  {{"input", "a time"}, {"previous_response_id", first["id"]}, {"max_output_tokens", 4},
                                   {"temperature", 0}});
    EXPECT_EQ(second["previous_response_id"], first["id"]);
    std::string first_text;
    for (const json& item : first["output"]) first_text += item["content"][0]["text"].get<std::string>();
    json messages = json::array({{{"role", "user"}, {"content", "Once upon"}}});
    if (!first["output"].empty()) messages.push_back({{"role", "assistant"}, {"content", first_text}});
    messages.push_back({{"role", "user"}, {"content", "a time"}});
    const auto [chat, chunks] = run(*gw, Endpoint::chat_completions, {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
    EXPECT_EQ(second["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    // Both are stored; GET answers the response as it was sent; DELETE drops it.
    EXPECT_EQ(json::parse(gw->stored_response(first["id"]).body), first);
    EXPECT_EQ(gw->delete_response(first["id"]).status, 200);
    const ApiError gone = error_of([&] { gw->stored_response(first["id"]); });
    EXPECT_EQ(gone.status, 404);
    EXPECT_EQ(gone.code, "not_found");
    const ApiError missing = error_of([&] {
        run(*gw, Endpoint::responses, {{"input", "x"}, {"previous_response_id", first["id"]}});
    });
    EXPECT_EQ(missing.status, 404);
    EXPECT_EQ(missing.param, "previous_response_id");
    EXPECT_EQ(missing.code, "previous_response_not_found");
    EXPECT_NE(std::string(missing.what()).find(first["id"].get<std::string>()), std::string::npos);
}

TEST_F(GatewayResponses, TheCapEvictsTheOldestAndErrorsNameResponsesFields) {
    auto gw = gateway(1);
    const auto [a, ea] = run(*gw, Endpoint::responses, {{"input", "Once"}, {"max_output_tokens", 2}});
    const auto [b, eb] = run(*gw, Endpoint::responses, {{"input", "upon"}, {"max_output_tokens", 2}});
    EXPECT_EQ(error_of([&] { gw->stored_response(a["id"]); }).status, 404);
    EXPECT_EQ(gw->stored_response(b["id"]).status, 200);
    const ApiError big = error_of([&] { run(*gw, Endpoint::responses, {{"input", "x"}, {"max_output_tokens", 100000}}); });
    EXPECT_EQ(big.param, "max_output_tokens");
    const ApiError hosted = error_of([&] {
        run(*gw, Endpoint::responses, {{"input", "x"}, {"tools", json::array({{{"type", "web_search"}}})}});
    });
    EXPECT_EQ(hosted.param, "tools[0].type");
    // A refused image names the input item it was sent in (instructions and a merged assistant turn
    // before it shift the chat message index).
    const json items = json::parse(R"([{"role":"user","content":"a"},
        {"role":"assistant","content":[{"type":"output_text","text":"b"}]},
        {"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
        {"type":"function_call_output","call_id":"c","output":"r"},
        {"role":"user","content":[{"type":"input_text","text":"see"},
                                  {"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}])");
    const ApiError image = error_of([&] {
        run(*gw, Endpoint::responses, {{"input", items}, {"instructions", "Be brief."}, {"max_output_tokens", 2}});
    });
    EXPECT_EQ(image.param, "input[4].content[1]") << image.what();
    EXPECT_NE(std::string(image.what()).find("'input[4].content[1]'"), std::string::npos) << image.what();
}
