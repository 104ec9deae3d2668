// Run-time LoRA adapters on a server of several base models (issue 47): POST /v1/load_lora_adapter
// names the adapter's `base`. An adapter loaded at run time answers exactly as the same adapter
// given at start on a server of its one base (the oracle), whether its base was in memory or not;
// it comes back with every new instance of its base (a reload); unloading it turns new requests away (404) while requests running under it finish;
// and every refusal names what is wrong.
#include <filesystem>
#include <future>
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

struct Fixture {
    std::string a, c, big;       // base models: a and c of one shape (other weights), big of another
    std::string lora_a, lora_c, lora_big;  // adapters of a (GGUF), c (PEFT folder) and big (GGUF)
};

const Fixture& fixture_models() {
    static const Fixture x = [] {
        Fixture x{server_test_model(), temp_path("runtime-lora-c.gguf"), server_test_model(true),
                  temp_path("runtime-lora-a.gguf"), temp_path("runtime-lora-c-peft"), temp_path("runtime-lora-big.gguf")};
        if (!std::filesystem::exists(x.c)) {
            auto r = run_pagoda({"gen-model", "--preset", "tiny", "-o", x.c, "--seed", "9"});
            if (r.exit_code != 0) throw std::runtime_error("gen-model failed: " + r.err);
        }
        pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(x.a), {.rank = 8, .alpha = 16, .seed = 41},
                                           x.lora_a, "");
        pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(x.c), {.rank = 4, .alpha = 8, .seed = 42}, "",
                                           x.lora_c);
        pagoda::lora::write_random_adapter(*pagoda::gguf::File::open(x.big), {.rank = 4, .alpha = 8, .seed = 43},
                                           x.lora_big, "");
        return x;
    }();
    return x;
}

const std::vector<std::string> kSmall = {"-c", "128", "--max-seqs", "2"};

json completion(int port, const std::string& model, int max_tokens = 12, const std::vector<std::string>& headers = {}) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"model", model}};
    const HttpResult r = http_request(port, "POST", "/v1/completions", body.dump(), headers);
    json j = json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
    if (j.is_discarded()) j = json{{"raw", r.body}};
    j["_status"] = r.status;
    return j;
}

std::string text_of(const json& j) {
    return j.contains("choices") ? j["choices"][0]["text"].get<std::string>() : "<error " + j.dump() + ">";
}

// The adapter given at start on a server of its one base (--lora NAME=PATH): the oracle.
std::string alone(const std::string& base, const std::string& adapter, int max_tokens = 12) {
    std::vector<std::string> args = {"--lora", "x=" + adapter};
    args.insert(args.end(), kSmall.begin(), kSmall.end());
    ServeProcess server(args, base);
    return text_of(completion(server.port(), "x", max_tokens));
}

HttpResult post(int port, const std::string& path, const json& body, const std::vector<std::string>& headers = {}) {
    return http_request(port, "POST", path, body.dump(), headers);
}

json error_of(const HttpResult& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json{{"message", r.body}};
}

std::string state_of(int port, const std::string& id, const std::vector<std::string>& headers = {}) {
    return json::parse(http_request(port, "GET", "/v1/models/" + id, "", headers).body).value("state", "?");
}

TEST(ServeMultiLoraRuntime, AnAdapterLoadedAtRunTimeAnswersAsGivenAtStart) {
    const Fixture& f = fixture_models();
    const std::string want_a = alone(f.a, f.lora_a), want_c = alone(f.c, f.lora_c);
    std::vector<std::string> args = {"-m", "c=" + f.c, "--allow-runtime-lora"};
    args.insert(args.end(), kSmall.begin(), kSmall.end());
    ServeProcess server(args, "a=" + f.a);

    // a is not loaded: the adapter is registered and loads with it.
    const HttpResult load = post(server.port(), "/v1/load_lora_adapter",
                                 {{"lora_name", "ra"}, {"lora_path", f.lora_a}, {"base", "a"}});
    ASSERT_EQ(load.status, 200) << load.body;
    EXPECT_EQ(load.body, "Success: LoRA adapter 'ra' added; it loads with its base model 'a'.");
    EXPECT_EQ(state_of(server.port(), "a"), "unloaded");
    const json card = json::parse(http_request(server.port(), "GET", "/v1/models/ra").body);
    EXPECT_EQ(card["parent"], "a") << card.dump();
    const json ra = completion(server.port(), "ra");
    ASSERT_EQ(ra["_status"], 200) << ra.dump();
    EXPECT_EQ(ra["model"], "ra");
    EXPECT_EQ(text_of(ra), want_a);

    // c in memory takes its adapter at once.
    ASSERT_EQ(completion(server.port(), "c")["_status"], 200);
    const HttpResult load_c = post(server.port(), "/v1/load_lora_adapter",
                                   {{"lora_name", "rc"}, {"lora_path", f.lora_c}, {"base", "c"}});
    ASSERT_EQ(load_c.status, 200) << load_c.body;
    EXPECT_EQ(load_c.body, "Success: LoRA adapter 'rc' added successfully.");
    EXPECT_EQ(text_of(completion(server.port(), "rc")), want_c);
    EXPECT_EQ(text_of(completion(server.port(), "ra")), want_a);

    const json list = json::parse(http_request(server.port(), "GET", "/lora-adapters").body);
    ASSERT_EQ(list.size(), 2u) << list.dump();
    EXPECT_EQ(list[0]["name"], "ra");
    EXPECT_EQ(list[0]["base"], "a");
    EXPECT_EQ(list[0]["path"], f.lora_a);
    EXPECT_EQ(list[0]["loaded"], true);
    EXPECT_EQ(list[0]["runtime"], true);
    EXPECT_EQ(list[1]["name"], "rc");
    EXPECT_EQ(list[1]["base"], "c");
    EXPECT_EQ(list[1]["loaded"], true);
    EXPECT_EQ(list[1]["id"], 0);
    const json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
    ASSERT_EQ(models["data"].size(), 4u) << models.dump();
    EXPECT_EQ(models["data"][2]["id"], "ra");
    EXPECT_EQ(models["data"][2]["parent"], "a");
    EXPECT_EQ(models["data"][3]["id"], "rc");
    EXPECT_EQ(models["data"][3]["parent"], "c");

    // Unloaded: new requests get 404, the base serves on, the adapter may be loaded again.
    const HttpResult unload = post(server.port(), "/v1/unload_lora_adapter", {{"lora_name", "rc"}});
    ASSERT_EQ(unload.status, 200) << unload.body;
    const json gone = completion(server.port(), "rc");
    EXPECT_EQ(gone["_status"], 404) << gone.dump();
    EXPECT_EQ(gone["error"]["code"], "model_not_found");
    EXPECT_EQ(completion(server.port(), "c")["_status"], 200);
    EXPECT_EQ(json::parse(http_request(server.port(), "GET", "/v1/models").body)["data"].size(), 3u);
    ASSERT_EQ(post(server.port(), "/v1/load_lora_adapter", {{"lora_name", "rc"}, {"lora_path", f.lora_c}, {"base", "c"}})
                  .status,
              200);
    EXPECT_EQ(text_of(completion(server.port(), "rc")), want_c);
}

TEST(ServeMultiLoraRuntime, AReloadKeepsTheAdapterAndAnUnloadLetsRunningRequestsFinish) {
    const Fixture& f = fixture_models();
    const std::string want_a = alone(f.a, f.lora_a), want_long = alone(f.a, f.lora_a, 100);
    const std::vector<std::string> admin = {"Authorization: Bearer admin-key-2"};
    const std::vector<std::string> user = {"Authorization: Bearer user-key-2"};
    std::vector<std::string> args = {"-m", "c=" + f.c, "--allow-runtime-lora", "--admin-key", "admin-key-2", "--open-health",
                                     "--api-key", "user-key-2"};
    args.insert(args.end(), kSmall.begin(), kSmall.end());
    ServeProcess server(args, "a=" + f.a);
    const json body = {{"lora_name", "ra"}, {"lora_path", f.lora_a}, {"base", "a"}};
    const HttpResult by_user = post(server.port(), "/v1/load_lora_adapter", body, user);
    EXPECT_EQ(by_user.status, 403) << by_user.body;
    EXPECT_EQ(error_of(by_user)["code"], "admin_key_required");
    ASSERT_EQ(completion(server.port(), "a", 4, user)["_status"], 200);  // a in memory: loads into it now
    ASSERT_EQ(post(server.port(), "/v1/load_lora_adapter", body, admin).status, 200);
    EXPECT_EQ(text_of(completion(server.port(), "ra", 12, user)), want_a);

    ASSERT_EQ(http_request(server.port(), "POST", "/admin/models/a/reload", "{}", admin).status, 202);
    int64_t version = 0;
    for (int i = 0; i < 500 && version < 2; ++i) {
        version = json::parse(http_request(server.port(), "GET", "/v1/models/a", "", admin).body).value("version", 0);
        if (version < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(version, 2);
    EXPECT_EQ(text_of(completion(server.port(), "ra", 12, user)), want_a);

    // A long request under the adapter runs while it is unloaded, and ends as it would have.
    auto running = std::async(std::launch::async, [&] { return completion(server.port(), "ra", 100, user); });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const HttpResult unload = post(server.port(), "/v1/unload_lora_adapter", {{"lora_name", "ra"}, {"base", "a"}}, admin);
    ASSERT_EQ(unload.status, 200) << unload.body;
    EXPECT_EQ(completion(server.port(), "ra", 4, user)["_status"], 404);
    const json done = running.get();
    ASSERT_EQ(done["_status"], 200) << done.dump();
    EXPECT_EQ(text_of(done), want_long);
}

TEST(ServeMultiLoraRuntime, RefusalsNameTheFieldTheAdapterAndTheBase) {
    const Fixture& f = fixture_models();
    ServeProcess server({"-m", "c=" + f.c, "-m", "big=" + f.big, "--allow-runtime-lora", "--lora", "c:lc=" + f.lora_c},
                        "a=" + f.a);
    auto refused = [&](const char* path, const json& body, int status, const std::string& param,
                       const std::string& words) {
        const HttpResult r = post(server.port(), path, body);
        EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.body;
        const json e = error_of(r);
        EXPECT_EQ(e.value("param", json()).is_null() ? std::string() : e["param"].get<std::string>(), param) << r.body;
        EXPECT_NE(e.value("message", "").find(words), std::string::npos) << body.dump() << " -> " << r.body;
    };
    const char* load = "/v1/load_lora_adapter";
    refused(load, {{"lora_name", "x"}, {"lora_path", f.lora_a}}, 400, "base",
            "'base' is required: this server serves several models; name the one the adapter belongs to ('a', 'c', "
            "'big')");
    refused(load, {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "zz"}}, 404, "base",
            "'base' names the model 'zz', which this server does not serve");
    refused(load, {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", 3}}, 400, "base", "base");
    refused(load, {{"lora_name", "c"}, {"lora_path", f.lora_a}, {"base", "a"}}, 400, "lora_name",
            "'c' is a base model's id");
    refused(load, {{"lora_name", "lc"}, {"lora_path", f.lora_a}, {"base", "a"}}, 400, "lora_name",
            "a LoRA adapter named 'lc' is already loaded (on 'c')");
    refused(load, {{"lora_name", "x"}, {"lora_path", "/no/such/adapter"}, {"base", "a"}}, 400, "lora_path",
            "LoRA adapter 'x': no file or folder at '/no/such/adapter'");
    refused(load, {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "a"}, {"scale", 2}}, 400, "scale",
            "'scale' is not a field of this endpoint");
    refused("/v1/unload_lora_adapter", {{"lora_name", "nope"}}, 404, "lora_name", "no LoRA adapter named 'nope'");
    refused("/v1/unload_lora_adapter", {{"lora_name", "lc"}}, 400, "lora_name",
            "the LoRA adapter 'lc' was given at start (--lora c:lc=...)");

    // Shapes that do not fit a base in memory: refused now, naming adapter and base.
    ASSERT_EQ(completion(server.port(), "big", 2)["_status"], 200);
    const HttpResult misfit = post(server.port(), load, {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "big"}});
    EXPECT_EQ(misfit.status, 400) << misfit.body;
    EXPECT_NE(error_of(misfit)["message"].get<std::string>().find("LoRA adapter 'x' could not be loaded: "),
              std::string::npos)
        << misfit.body;
    EXPECT_NE(error_of(misfit)["message"].get<std::string>().find("(base model 'big')"), std::string::npos)
        << misfit.body;
    EXPECT_EQ(completion(server.port(), "x")["_status"], 404);
    // ...and for a base not in memory, its load fails naming both, until the adapter is unloaded.
    ASSERT_EQ(post(server.port(), load, {{"lora_name", "y"}, {"lora_path", f.lora_big}, {"base", "a"}}).status, 200);
    const json failed = completion(server.port(), "a");
    EXPECT_EQ(failed["_status"], 503) << failed.dump();
    EXPECT_EQ(failed["error"]["code"], "model_failed");
    EXPECT_NE(failed["error"]["message"].get<std::string>().find("the LoRA adapter 'y' (" + f.lora_big +
                                                                 ", loaded at run time) does not fit the base model 'a'"),
              std::string::npos)
        << failed.dump();
    ASSERT_EQ(post(server.port(), "/v1/unload_lora_adapter", {{"lora_name", "y"}}).status, 200);
    json ok = json::object();
    for (int i = 0; i < 200 && ok.value("_status", 0) != 200; ++i) {  // a failed load is retried after 2 s
        ok = completion(server.port(), "a", 2);
        if (ok["_status"] != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(ok["_status"], 200) << ok.dump();
}

TEST(ServeMultiLoraRuntime, OneModelServerChecksBaseAndMultiModelNeedsTheFlag) {
    const Fixture& f = fixture_models();
    {
        ServeProcess server({"--allow-runtime-lora", "--model-name", "solo"}, f.a);
        const HttpResult wrong = post(server.port(), "/v1/load_lora_adapter",
                                      {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "other"}});
        EXPECT_EQ(wrong.status, 404) << wrong.body;
        EXPECT_EQ(error_of(wrong)["param"], "base");
        ASSERT_EQ(post(server.port(), "/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "solo"}})
                      .status,
                  200);
        EXPECT_EQ(completion(server.port(), "x")["_status"], 200);
        const json list = json::parse(http_request(server.port(), "GET", "/lora-adapters").body);
        ASSERT_EQ(list.size(), 1u);
        EXPECT_EQ(list[0]["name"], "x");
    }
    ServeProcess server({"-m", "c=" + f.c}, "a=" + f.a);
    const HttpResult off = post(server.port(), "/v1/load_lora_adapter",
                                {{"lora_name", "x"}, {"lora_path", f.lora_a}, {"base", "a"}});
    EXPECT_EQ(off.status, 400) << off.body;
    EXPECT_NE(off.body.find("start the server with --allow-runtime-lora"), std::string::npos) << off.body;
}

}  // namespace
