// LoRA adapters on a server of several base models (issue 47): `--lora MODEL:NAME=PATH[:SCALE]` ties
// each adapter to its base. An adapter answers exactly as the same adapter on a one-model server
// (the oracle), /v1/models lists it with `parent` its base, a request naming it loads its base on
// demand, a new version of the base (reload) loads its adapters again, API keys cover adapters,
// and the refusals name
// what is wrong: an unknown base, an adapter without a base, an adapter whose shapes do not fit.
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "server/serve_harness.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

// Two bases of the same (tiny) shape but other weights, a third of another shape, and an adapter
// written for each of the first two.
struct Fixture {
    std::string a, c, big;          // base models
    std::string lora_a, lora_c;     // adapters of a and c
};

const Fixture& fixture_models() {
    static const Fixture x = [] {
        Fixture x{server_test_model(), temp_path("multi-lora-c.gguf"), server_test_model(true),
                  temp_path("multi-lora-a.gguf"), temp_path("multi-lora-c-peft")};
        if (!std::filesystem::exists(x.c)) {
            auto r = run_pagoda({"gen-model", "--preset", "tiny", "-o", x.c, "--seed", "8"});
            if (r.exit_code != 0) throw std::runtime_error("gen-model failed: " + r.err);
        }
        pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(x.a), {.rank = 8, .alpha = 16, .seed = 31},
                                           x.lora_a, "");
        pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(x.c), {.rank = 4, .alpha = 8, .seed = 32}, "",
                                           x.lora_c);
        return x;
    }();
    return x;
}

json completion(int port, const std::string& model, const json& extra = json::object(),
               const std::vector<std::string>& headers = {}) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"model", model}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    const HttpResult r = http_request(port, "POST", "/v1/completions", body.dump(), headers);
    json j = json::parse(r.body.empty() ? "{}" : r.body);
    j["_status"] = r.status;
    return j;
}

std::string text_of(const json& j) {
    return j.contains("choices") ? j["choices"][0]["text"].get<std::string>() : "<error " + j.dump() + ">";
}

// The same adapter's greedy answer on a server of that one base (ServeLora's form, --lora NAME=PATH).
std::string alone(const std::string& base, const std::string& adapter, float scale = 1) {
    ServeProcess server({"--lora", "x=" + adapter + (scale == 1 ? "" : ":" + std::to_string(scale))}, base);
    return text_of(completion(server.port(), "x"));
}

std::string state_of(int port, const std::string& id) {
    return json::parse(http_request(port, "GET", "/v1/models/" + id).body).value("state", "?");
}

TEST(ServeMultiLora, EachAdapterAnswersAsOnAServerOfItsBaseAndLoadsItsBase) {
    const Fixture& f = fixture_models();
    const std::string want_a = alone(f.a, f.lora_a), want_c = alone(f.c, f.lora_c, 0.5f);
    const std::string plain_a = [&] {
        ServeProcess server({}, f.a);
        return text_of(completion(server.port(), ""));
    }();
    ASSERT_NE(want_a, plain_a);

    ServeProcess server({"-m", "c=" + f.c, "--lora", "a:la=" + f.lora_a, "--lora", "c:lc=" + f.lora_c + ":0.5"},
                        "a=" + f.a);
    const json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
    ASSERT_EQ(models["data"].size(), 4u) << models.dump();
    EXPECT_EQ(models["data"][2]["id"], "la");
    EXPECT_EQ(models["data"][2]["parent"], "a");
    EXPECT_EQ(models["data"][3]["id"], "lc");
    EXPECT_EQ(models["data"][3]["parent"], "c");
    EXPECT_EQ(state_of(server.port(), "la"), "unloaded");

    // c loaded first; the adapter of a then loads a.
    const json lc = completion(server.port(), "lc");
    ASSERT_EQ(lc["_status"], 200) << lc.dump();
    EXPECT_EQ(lc["model"], "lc");
    EXPECT_EQ(text_of(lc), want_c);
    EXPECT_EQ(state_of(server.port(), "a"), "unloaded");
    const json la = completion(server.port(), "la");
    ASSERT_EQ(la["_status"], 200) << la.dump();
    EXPECT_EQ(text_of(la), want_a);
    EXPECT_EQ(state_of(server.port(), "a"), "loaded");
    EXPECT_EQ(state_of(server.port(), "la"), "loaded");
    // The base itself, and the adapter by llama-server's `lora` field with model = the base.
    EXPECT_EQ(text_of(completion(server.port(), "a")), plain_a);
    EXPECT_EQ(text_of(completion(server.port(), "a", {{"lora", {{{"id", 0}, {"scale", 1}}}}})), want_a);
    // Both bases loaded now: each adapter still answers as alone.
    EXPECT_EQ(text_of(completion(server.port(), "lc")), want_c);
    EXPECT_EQ(text_of(completion(server.port(), "la")), want_a);

    // An adapter belongs to its base only: `lora` on the other base does not find it.
    const json wrong = completion(server.port(), "c", {{"lora", {{{"path", f.lora_a}, {"scale", 1}}}}});
    EXPECT_EQ(wrong["_status"], 404) << wrong.dump();
    // Run-time loading needs --allow-runtime-lora (serve_multi_lora_runtime_test.cpp), refused by name.
    const HttpResult load = http_request(server.port(), "POST", "/v1/load_lora_adapter",
                                         json{{"lora_name", "z"}, {"lora_path", f.lora_a}, {"base", "a"}}.dump());
    EXPECT_EQ(load.status, 400) << load.body;
    EXPECT_NE(load.body.find("start the server with --allow-runtime-lora"), std::string::npos) << load.body;
}

TEST(ServeMultiLora, AnAdapterLoadsAgainWithANewVersionOfItsBase) {
    const Fixture& f = fixture_models();
    const std::string want_a = alone(f.a, f.lora_a);
    const std::vector<std::string> admin = {"Authorization: Bearer admin-key-1"};
    ServeProcess server({"-m", "c=" + f.c, "--lora", "a:la=" + f.lora_a, "--admin-key", "admin-key-1", "--open-health"}, "a=" + f.a);
    EXPECT_EQ(completion(server.port(), "la")["_status"], 401);  // keys apply to adapters as to models
    EXPECT_EQ(text_of(completion(server.port(), "la", json::object(), admin)), want_a);
    ASSERT_EQ(http_request(server.port(), "POST", "/admin/models/a/reload", "{}", admin).status, 202);
    int64_t version = 0;
    for (int i = 0; i < 500 && version < 2; ++i) {
        const json card = json::parse(http_request(server.port(), "GET", "/v1/models/a", "", admin).body);
        version = card.value("version", int64_t(0));
        if (version < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(version, 2);
    EXPECT_EQ(text_of(completion(server.port(), "la", json::object(), admin)), want_a);
}

TEST(ServeMultiLora, RefusalsNameTheBaseAndTheAdapter) {
    const Fixture& f = fixture_models();
    auto refused = [&](const std::vector<std::string>& lora, const std::string& words) {
        std::vector<std::string> args = {"serve", "-m", "a=" + f.a, "-m", "c=" + f.c, "--port", "0"};
        args.insert(args.end(), lora.begin(), lora.end());
        const ProcessResult r = run_pagoda(args);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    };
    refused({"--lora", "zz:la=" + f.lora_a}, "no model 'zz' is served (the models are 'a', 'c')");
    refused({"--lora", "la=" + f.lora_a}, "name the adapter's base model: --lora MODEL:NAME=PATH");
    refused({"--lora", "a:c=" + f.lora_a}, "'c' is already a model's id");
    refused({"--lora", "a:x=" + f.lora_a, "--lora", "c:x=" + f.lora_c}, "the adapter name 'x' is also given to 'a'");

    // An adapter of a attached to a base of another shape: that base's load fails naming both.
    ServeProcess server({"-m", "big=" + f.big, "--lora", "big:la=" + f.lora_a}, "a=" + f.a);
    const json r = completion(server.port(), "la");
    EXPECT_EQ(r["_status"], 503) << r.dump();
    const std::string message = r["error"]["message"];
    EXPECT_NE(message.find("the LoRA adapter 'la' (" + f.lora_a + ") does not fit the base model " + f.big),
              std::string::npos)
        << message;
    EXPECT_EQ(r["error"]["code"], "model_failed");
    // The other base still serves.
    EXPECT_EQ(completion(server.port(), "a")["_status"], 200);
}

}  // namespace
