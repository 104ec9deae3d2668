// The gateway's Messages API over a fake model: a message is the same generation as the chat
// request it translates to (same text, same prompt), its stream adds up to the non-streamed
// message, count_tokens counts that prompt, a forced tool comes back as a tool_use block with
// input valid for its schema, a thinking template gives thinking blocks, and refusals name the
// Anthropic field.
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
    bool wait() {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, std::chrono::seconds(20), [&] { return done; });
    }
};

class GatewayAnthropic : public ::testing::Test {
protected:
    // `chat_template`: --chat-template's name; `model_template`: the model's own (when that is empty).
    void start_gateway(const std::string& chat_template, const std::string& model_template = {}) {
        tok_ = load_tokenizer();
        if (!tok_) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
        GatewayOptions o;
        o.model_name = "fake-model";
        o.scheduler.max_seqs = 3;
        o.scheduler.max_batched_tokens = 256;
        o.chat_template = chat_template;
        gw_ = std::make_unique<Gateway>(o, ApiKeyTable{}, [this, model_template](engine::EngineOptions eo) {
            LoadedModel m;
            m.engine = std::make_unique<engine::Engine>(
                std::make_unique<engine::test::FakeStepModel>(tok_->n_vocab(), 64, 32, 1024), tok_, std::move(eo));
            m.description = "fake";
            m.chat_template = model_template;
            return m;
        });
        gw_->load();
    }

    // Runs a /v1/messages body: the events (opening ones first) and the final message.
    std::pair<std::vector<json>, json> message(const json& body) {
        Collector c;
        auto job = gw_->start_messages(body, nullptr, gw_->new_request_id(), c.sink());
        EXPECT_TRUE(c.wait());
        std::vector<json> events = job->opening_chunks();
        for (auto& [sub, d] : c.deltas)
            for (auto& e : job->add(sub, d)) events.push_back(std::move(e));
        EXPECT_TRUE(job->done());
        EXPECT_FALSE(job->failure().has_value());
        json m = job->response();
        job->finish(200);
        return {events, m};
    }

    json chat(const json& body) {
        Collector c;
        auto job = gw_->start(Endpoint::chat_completions, body, nullptr, gw_->new_request_id(), c.sink());
        EXPECT_TRUE(c.wait());
        for (auto& [sub, d] : c.deltas) job->add(sub, d);
        json r = job->response();
        job->finish(200);
        return r;
    }

    ApiError messages_error(const json& body) {
        try {
            gw_->start_messages(body, nullptr, gw_->new_request_id(), [](size_t, const engine::Delta&) {});
        } catch (const ApiError& e) {
            return e;
        }
        ADD_FAILURE() << "not refused: " << body.dump();
        return ApiError::internal("not refused");
    }

    std::shared_ptr<const tokenizer::Tokenizer> tok_;
    std::unique_ptr<Gateway> gw_;
};

// Reassembles a stream's content blocks from its events, checking their order on the way.
json reassemble(const std::vector<json>& events) {
    EXPECT_FALSE(events.empty());
    EXPECT_EQ(events.front()["type"], "message_start");
    EXPECT_EQ(events.back()["type"], "message_stop");
    json content = json::array();
    std::vector<std::string> partial;
    bool open = false;
    for (const auto& e : events) {
        if (e["type"] == "content_block_start") {
            EXPECT_FALSE(open);
            EXPECT_EQ(e["index"], content.size());
            content.push_back(e["content_block"]);
            partial.emplace_back();
            open = true;
        } else if (e["type"] == "content_block_delta") {
            EXPECT_TRUE(open);
            json& b = content[e["index"].get<size_t>()];
            const json& d = e["delta"];
            if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
            else if (d["type"] == "thinking_delta")
                b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
            else if (d["type"] == "input_json_delta") partial[e["index"].get<size_t>()] += d["partial_json"].get<std::string>();
            else ADD_FAILURE() << d.dump();
        } else if (e["type"] == "content_block_stop") {
            EXPECT_TRUE(open);
            open = false;
            if (!partial[e["index"].get<size_t>()].empty()) content[e["index"].get<size_t>()]["input"] = json::parse(partial[e["index"].get<size_t>()]);
        }
    }
    EXPECT_FALSE(open);
    return content;
}

}  // namespace

TEST_F(GatewayAnthropic, AMessageIsTheChatGenerationItTranslatesTo) {
    start_gateway("chatml");
    if (!gw_) return;
    const json body = json::parse(R"({"model": "fake-model", "max_tokens": 12, "temperature": 0, "system": "Be brief.",
                                      "messages": [{"role": "user", "content": [{"type": "text", "text": "Once upon"}]}]})");
    auto [events, m] = message(body);
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_EQ(m["model"], "fake-model");
    EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);

    const json c = chat(json::parse(R"({"max_tokens": 12, "temperature": 0, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Once upon"}]})"));
    const std::string text = c["choices"][0]["message"]["content"];
    if (text.empty()) EXPECT_EQ(m["content"], json::array());
    else EXPECT_EQ(m["content"], json::array({{{"type", "text"}, {"text", text}}}));
    EXPECT_EQ(m["stop_reason"], c["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");
    EXPECT_EQ(m["stop_sequence"], nullptr);
    EXPECT_EQ(m["usage"]["input_tokens"], c["usage"]["prompt_tokens"]);
    EXPECT_EQ(m["usage"]["output_tokens"], c["usage"]["completion_tokens"]);

    // The stream adds up to the message, and message_start already knew the prompt's size.
    EXPECT_EQ(reassemble(events), m["content"]);
    EXPECT_EQ(events.front()["message"]["usage"]["input_tokens"], m["usage"]["input_tokens"]);
    const json& last_delta = events[events.size() - 2];
    EXPECT_EQ(last_delta["type"], "message_delta");
    EXPECT_EQ(last_delta["delta"]["stop_reason"], m["stop_reason"]);
    EXPECT_EQ(last_delta["usage"]["output_tokens"], m["usage"]["output_tokens"]);

    // count_tokens counts that prompt.
    json count = body;
    count.erase("max_tokens");
    count.erase("temperature");
    const SimpleResponse r = gw_->count_message_tokens(count, nullptr);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body), json({{"input_tokens", m["usage"]["input_tokens"]}}));
}

TEST_F(GatewayAnthropic, StopSequenceIsNamed) {
    start_gateway("chatml");
    if (!gw_) return;
    const json body = json::parse(R"({"max_tokens": 24, "temperature": 0,
                                      "messages": [{"role": "user", "content": "Once upon"}]})");
    const std::string text = message(body).second["content"][0]["text"];
    ASSERT_GE(text.size(), 4u);
    // A stop sequence from the middle of that output ends the same generation there.
    const std::string stop = text.substr(2, 2);
    json with_stop = body;
    with_stop["stop_sequences"] = {stop};
    const json m = message(with_stop).second;
    EXPECT_EQ(m["stop_reason"], "stop_sequence");
    EXPECT_EQ(m["stop_sequence"], stop);
    EXPECT_EQ(m["content"][0]["text"], text.substr(0, text.find(stop)));
}

TEST_F(GatewayAnthropic, AForcedToolIsAToolUseBlock) {
    start_gateway("chatml");
    if (!gw_) return;
    const json body = json::parse(R"({"max_tokens": 300, "temperature": 0,
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
                                                           "required": ["city"], "additionalProperties": false}}],
        "tool_choice": {"type": "tool", "name": "get_weather"}})");
    auto [events, m] = message(body);
    // Parallel calls are allowed: one block per call, each valid for the schema.
    ASSERT_GE(m["content"].size(), 1u) << m.dump();
    for (const json& block : m["content"]) {
        EXPECT_EQ(block["type"], "tool_use");
        EXPECT_EQ(block["name"], "get_weather");
        EXPECT_TRUE(block["input"] == json({{"city", "Paris"}}) || block["input"] == json({{"city", "Rome"}})) << block;
    }
    EXPECT_EQ(m["stop_reason"], "tool_use");
    EXPECT_EQ(reassemble(events), m["content"]);
    // disable_parallel_tool_use: exactly one.
    json single = body;
    single["tool_choice"]["disable_parallel_tool_use"] = true;
    const json one = message(single).second;
    ASSERT_EQ(one["content"].size(), 1u) << one.dump();
    EXPECT_EQ(one["content"][0]["input"], m["content"][0]["input"]) << "the first call is the same generation";
    const json& block = one["content"][0];

    // The result goes back as a tool_result and renders through the template: count_tokens counts
    // the longer prompt, and the message runs.
    json first = body;
    first.erase("max_tokens");
    first.erase("temperature");
    json next = first;
    next.erase("tool_choice");
    next["messages"].push_back({{"role", "assistant"}, {"content", one["content"]}});
    next["messages"].push_back(json::parse(R"({"role": "user", "content": [{"type": "tool_result", "tool_use_id": ")" +
                                           block["id"].get<std::string>() + R"(", "content": "18C"}]})"));
    const json before = json::parse(gw_->count_message_tokens(first, nullptr).body);
    const json after = json::parse(gw_->count_message_tokens(next, nullptr).body);
    EXPECT_GT(after["input_tokens"], before["input_tokens"]);
    next["max_tokens"] = 4;
    EXPECT_EQ(message(next).second["usage"]["input_tokens"], after["input_tokens"]);
}

TEST_F(GatewayAnthropic, ThinkingComesAsThinkingBlocks) {
    // Opens <think> in the prompt when enable_thinking: the output starts inside the reasoning.
    start_gateway("", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                      "<|im_start|>assistant\n{% if enable_thinking %}<think>\n{% endif %}");
    if (!gw_) return;
    const json body = json::parse(R"({"max_tokens": 8, "temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 4},
                                      "messages": [{"role": "user", "content": "Once upon"}]})");
    auto [events, m] = message(body);
    // budget_tokens is the chat request's thinking_token_budget: the server closes the thinking at 4 tokens.
    const json c = chat(json::parse(R"({"max_tokens": 8, "temperature": 0, "chat_template_kwargs": {"enable_thinking": true},
                                        "thinking_token_budget": 4, "messages": [{"role": "user", "content": "Once upon"}]})"));
    const std::string reasoning = c["choices"][0]["message"].value("reasoning_content", "");
    ASSERT_FALSE(reasoning.empty()) << c.dump();
    ASSERT_GE(m["content"].size(), 1u);
    EXPECT_EQ(m["content"][0], json({{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}}));
    EXPECT_EQ(reassemble(events), m["content"]);
    bool thinking_delta = false;
    for (const auto& e : events) thinking_delta = thinking_delta || (e["type"] == "content_block_delta" && e["delta"]["type"] == "thinking_delta");
    EXPECT_TRUE(thinking_delta);

    // Disabled: the template does not open the reasoning, so the output is text.
    json off = body;
    off["thinking"] = {{"type", "disabled"}};
    const json plain = message(off).second;
    for (const auto& b : plain["content"]) EXPECT_EQ(b["type"], "text");
    // Past thinking goes back to the template as reasoning_content; this one shows none of it.
    json again = body;
    again["messages"].push_back({{"role", "assistant"}, {"content", m["content"]}});
    again["messages"].push_back({{"role", "user"}, {"content", "more"}});
    again.erase("max_tokens");
    again.erase("temperature");
    EXPECT_EQ(gw_->count_message_tokens(again, nullptr).status, 200);
}

TEST_F(GatewayAnthropic, RefusalsNameTheAnthropicField) {
    start_gateway("chatml");
    if (!gw_) return;
    const json ok = json::parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": "a"}]})");
    auto with = [&](const char* key, json v) {
        json b = ok;
        b[key] = std::move(v);
        return b;
    };
    ApiError e = messages_error(with("thinking", {{"type", "enabled"}, {"budget_tokens", 2}}));
    EXPECT_EQ(e.param, "thinking");  // chatml does not think
    e = messages_error(with("stop_sequences", json::array({""})));
    EXPECT_EQ(e.param.rfind("stop_sequences", 0), 0u) << e.param;
    EXPECT_NE(std::string(e.what()).find("'stop_sequences"), std::string::npos) << e.what();
    e = messages_error(with("model", "claude-x"));
    EXPECT_EQ(e.status, 404);
    e = messages_error(with("max_tokens", 100000));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "max_tokens");
    e = messages_error(with("top_k", 1.5));
    EXPECT_EQ(e.param, "top_k");
}
