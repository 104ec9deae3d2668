// LoRA adapters through `pagoda serve` (issue 47): adapters are models of their own in /v1/models
// (parent: the base), a request picks one by `model` or by llama-server's `lora` field, the same
// request gets the same tokens whichever way it names the adapter and whatever runs beside it, and
// run-time load / unload (vLLM's endpoints, --allow-runtime-lora) under load loses nothing: every
// request completes or gets a clear error. With --max-loras an evicted adapter is read again.
#include <atomic>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "server/lora_registry.h"
#include "server/api_error.h"
#include "server/serve_harness.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

struct Adapters {
    std::string a, b, c;
};

const Adapters& adapters() {
    static const Adapters x = [] {
        auto base = pagoda::gguf::File::open(server_test_model());
        Adapters x{temp_path("serve-lora-a.gguf"), temp_path("serve-lora-b-peft"), temp_path("serve-lora-c.gguf")};
        pagoda::lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 21}, x.a, "");
        pagoda::lora::write_random_adapter(*base, {.rank = 4, .alpha = 8, .seed = 22}, "", x.b);
        pagoda::lora::write_random_adapter(*base, {.rank = 16, .alpha = 16, .seed = 23}, x.c, "");
        return x;
    }();
    return x;
}

json completion(int port, const json& body) {
    const HttpResult r = http_request(port, "POST", "/v1/completions", body.dump());
    json j = json::parse(r.body.empty() ? "{}" : r.body);
    j["_status"] = r.status;
    return j;
}

json greedy(const std::string& model, const json& extra = json::object()) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
    if (!model.empty()) body["model"] = model;
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return body;
}

std::string text_of(const json& j) { return j.contains("choices") ? j["choices"][0]["text"].get<std::string>() : "<error>"; }

TEST(ServeLora, AdaptersAreModelsAndPickedByModelOrLoraField) {
    ServeProcess server({"--lora", "a=" + adapters().a, "--lora", "b=" + adapters().b + ":0.5", "--alias", "base"});
    const json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
    ASSERT_EQ(models["data"].size(), 3u) << models.dump();
    EXPECT_EQ(models["data"][1]["id"], "a");
    EXPECT_EQ(models["data"][1]["parent"], "base");
    EXPECT_EQ(models["data"][2]["id"], "b");
    EXPECT_EQ(http_request(server.port(), "GET", "/v1/models/b").status, 200);

    const json base = completion(server.port(), greedy(""));
    const json a = completion(server.port(), greedy("a"));
    const json a_by_id = completion(server.port(), greedy("", {{"lora", {{{"id", 0}, {"scale", 1}}}}}));
    const json b = completion(server.port(), greedy("b"));
    const json b_by_id = completion(server.port(), greedy("", {{"lora", {{{"id", 1}, {"scale", 0.5}}}}}));
    const json none = completion(server.port(), greedy("", {{"lora", {{{"id", 0}, {"scale", 0}}}}}));
    for (const json* j : {&base, &a, &a_by_id, &b, &b_by_id, &none}) ASSERT_EQ((*j)["_status"], 200) << j->dump();
    EXPECT_EQ(a["model"], "a");
    EXPECT_EQ(text_of(a), text_of(a_by_id));
    EXPECT_EQ(text_of(b), text_of(b_by_id));
    EXPECT_EQ(text_of(none), text_of(base));
    EXPECT_NE(text_of(a), text_of(base));
    EXPECT_NE(text_of(b), text_of(a));

    // Mixed in flight together: each answer is what it was alone.
    std::vector<std::thread> threads;
    std::vector<std::string> got(9);
    for (int i = 0; i < 9; ++i)
        threads.emplace_back([&, i] { got[size_t(i)] = text_of(completion(server.port(), greedy(i % 3 == 0 ? "" : i % 3 == 1 ? "a" : "b"))); });
    for (auto& t : threads) t.join();
    for (int i = 0; i < 9; ++i) EXPECT_EQ(got[size_t(i)], text_of(i % 3 == 0 ? base : i % 3 == 1 ? a : b)) << i;

    // Errors: an unknown adapter, an unknown id, two adapters at once, run-time loading off.
    EXPECT_EQ(completion(server.port(), greedy("nope"))["_status"], 404);
    EXPECT_EQ(completion(server.port(), greedy("", {{"lora", {{{"id", 7}}}}}))["_status"], 404);
    const json two = completion(server.port(), greedy("", {{"lora", {{{"id", 0}}, {{"id", 1}}}}}));
    EXPECT_EQ(two["_status"], 400);
    EXPECT_EQ(completion(server.port(), greedy("", {{"lora", "a"}}))["_status"], 400);
    const HttpResult off = http_request(server.port(), "POST", "/v1/load_lora_adapter",
                                        json{{"lora_name", "c"}, {"lora_path", adapters().c}}.dump());
    EXPECT_EQ(off.status, 400);
    EXPECT_NE(off.body.find("--allow-runtime-lora"), std::string::npos) << off.body;
}

TEST(ServeLora, RuntimeLoadAndUnloadUnderLoadLoseNothing) {
    ServeProcess server({"--lora", "a=" + adapters().a, "--allow-runtime-lora", "--max-loras", "2", "--max-seqs", "8"});
    const std::string a_alone = text_of(completion(server.port(), greedy("a")));
    const json load_c = {{"lora_name", "c"}, {"lora_path", adapters().c}};
    ASSERT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump()).status, 200);
    const std::string c_alone = text_of(completion(server.port(), greedy("c")));
    ASSERT_NE(c_alone, "<error>");

    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, not_found{0}, other{0};
    std::vector<std::string> bad;
    std::mutex bad_mutex;
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t)
        clients.emplace_back([&, t] {
            for (int i = 0; !stop; ++i) {
                const std::string model = (t + i) % 3 == 0 ? "" : (t + i) % 3 == 1 ? "a" : "c";
                const json r = completion(server.port(), greedy(model));
                if (r["_status"] == 200) {
                    const std::string want = model.empty() ? "" : model == "a" ? a_alone : c_alone;
                    if (!want.empty() && text_of(r) != want) {
                        std::lock_guard lock(bad_mutex);
                        bad.push_back(model + ": " + text_of(r));
                    }
                    ++ok;
                } else if (r["_status"] == 404 && model == "c") {
                    ++not_found;  // c was unloaded at that moment: a clear model_not_found
                } else {
                    std::lock_guard lock(bad_mutex);
                    bad.push_back(r.dump());
                    ++other;
                }
            }
        });
    const json load_b = {{"lora_name", "b"}, {"lora_path", adapters().b}};
    for (int round = 0; round < 6; ++round) {
        EXPECT_EQ(http_request(server.port(), "POST", "/v1/unload_lora_adapter", json{{"lora_name", "c"}}.dump()).status, 200);
        // A third adapter beside a and c: the cap of 2 evicts an idle one, read again when asked for.
        EXPECT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_b.dump()).status, 200);
        EXPECT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump()).status, 200);
        EXPECT_EQ(http_request(server.port(), "POST", "/v1/unload_lora_adapter", json{{"lora_name", "b"}}.dump()).status, 200);
    }
    stop = true;
    for (auto& t : clients) t.join();
    EXPECT_GT(ok.load(), 10);
    EXPECT_EQ(other.load(), 0);
    EXPECT_TRUE(bad.empty()) << bad.front();
    // Errors of the endpoints: a name in use, a bad file, an unknown name.
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump()).status, 400);
    const HttpResult broken = http_request(server.port(), "POST", "/v1/load_lora_adapter",
                                           json{{"lora_name", "x"}, {"lora_path", server_test_model()}}.dump());
    EXPECT_EQ(broken.status, 400);
    EXPECT_NE(broken.body.find("general.type"), std::string::npos) << broken.body;
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/unload_lora_adapter", json{{"lora_name", "x"}}.dump()).status, 404);
}

json post(int port, const std::string& path, const json& body) {
    const HttpResult r = http_request(port, "POST", path, body.dump());
    json j = json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) j = json{{"_body", r.body}};
    j["_status"] = r.status;
    return j;
}

std::string chat_text(const json& j) {
    return j.contains("choices") ? j["choices"][0]["message"]["content"].get<std::string>() : "<error>";
}

// Every endpoint that runs the model takes an adapter by `model`: it runs under it (the answer is
// the chat endpoint's under the same adapter, and differs from the base's) and the response names
// it; an unknown model is a 404 everywhere; `lora` where the endpoint has no such field is a 400
// naming it.
TEST(ServeLora, EveryEndpointTakesAnAdapterByModel) {
    ServeProcess server({"--lora", "a=" + adapters().a, "--alias", "base"});
    const int port = server.port();
    const json user = {{{"role", "user"}, {"content", "Once upon a time"}}};
    auto chat = [&](const std::string& model) {
        return post(port, "/v1/chat/completions",
                    {{"model", model}, {"messages", user}, {"max_tokens", 10}, {"temperature", 0}});
    };
    const json chat_a = chat("a"), chat_base = chat("base");
    ASSERT_EQ(chat_a["_status"], 200) << chat_a.dump();
    ASSERT_NE(chat_text(chat_a), chat_text(chat_base)) << "the adapter changes nothing here: the test would prove nothing";

    // Anthropic Messages.
    auto messages = [&](const std::string& model) {
        return post(port, "/v1/messages", {{"model", model}, {"messages", user}, {"max_tokens", 10}, {"temperature", 0}});
    };
    const json msg_a = messages("a");
    ASSERT_EQ(msg_a["_status"], 200) << msg_a.dump();
    EXPECT_EQ(msg_a["model"], "a");
    const std::string msg_text = msg_a["content"].empty() ? "" : msg_a["content"][0].value("text", "");
    EXPECT_EQ(msg_text, chat_text(chat_a));
    EXPECT_EQ(messages("base")["model"], "base");
    EXPECT_EQ(messages("zz")["_status"], 404);
    EXPECT_EQ(post(port, "/v1/messages/count_tokens", {{"model", "a"}, {"messages", user}})["_status"], 200);
    const json msg_lora = post(port, "/v1/messages", {{"model", "a"}, {"messages", user}, {"max_tokens", 4}, {"lora", json::array()}});
    EXPECT_EQ(msg_lora["_status"], 400) << msg_lora.dump();
    EXPECT_NE(msg_lora.dump().find("lora"), std::string::npos) << msg_lora.dump();

    // Responses.
    const json resp_a = post(port, "/v1/responses", {{"model", "a"}, {"input", user}, {"max_output_tokens", 10}, {"temperature", 0}});
    ASSERT_EQ(resp_a["_status"], 200) << resp_a.dump();
    EXPECT_EQ(resp_a["model"], "a");
    std::string resp_text;
    for (const auto& item : resp_a["output"])
        if (item.value("type", "") == "message") resp_text = item["content"][0].value("text", "");
    EXPECT_EQ(resp_text, chat_text(chat_a));
    EXPECT_EQ(post(port, "/v1/responses", {{"model", "zz"}, {"input", "x"}})["_status"], 404);

    // Embeddings: the adapter's vectors differ from the base's, the same under it twice.
    auto embed = [&](const std::string& model) {
        return post(port, "/v1/embeddings", {{"model", model}, {"input", "Once upon a time"}});
    };
    const json emb_a = embed("a"), emb_base = embed("base");
    ASSERT_EQ(emb_a["_status"], 200) << emb_a.dump();
    EXPECT_EQ(emb_a["model"], "a");
    EXPECT_EQ(emb_base["model"], "base");
    EXPECT_NE(emb_a["data"][0]["embedding"], emb_base["data"][0]["embedding"]);
    EXPECT_EQ(emb_a["data"][0]["embedding"], embed("a")["data"][0]["embedding"]);
    EXPECT_EQ(embed("zz")["_status"], 404);
    const json emb_lora = post(port, "/v1/embeddings", {{"input", "x"}, {"lora", {{{"id", 0}}}}});
    EXPECT_EQ(emb_lora["_status"], 400);
    EXPECT_EQ(emb_lora["error"]["param"], "lora") << emb_lora.dump();

    // Rerank / score: the adapter passes the model check (this model cannot rerank: the 400 says so,
    // not a 404), an unknown model does not.
    const json rr = post(port, "/v1/rerank", {{"model", "a"}, {"query", "q"}, {"documents", {"d"}}});
    EXPECT_EQ(rr["_status"], 400) << rr.dump();
    EXPECT_NE(rr.dump().find("not supported"), std::string::npos) << rr.dump();
    EXPECT_EQ(post(port, "/v1/rerank", {{"model", "zz"}, {"query", "q"}, {"documents", {"d"}}})["_status"], 404);
    EXPECT_EQ(post(port, "/v1/score", {{"model", "zz"}, {"text_1", "q"}, {"text_2", "d"}})["_status"], 404);
}

// The registry alone: LRU eviction of idle adapters, reload on use, ids stable across unloads.
TEST(LoraRegistry, EvictsTheLeastRecentlyUsedIdleAdapterAndReloads) {
    int loads = 0;
    auto loader = [&](const std::string& path, const std::string& name, float scale) {
        ++loads;
        auto a = std::make_shared<pagoda::lora::Adapter>();
        a->name = name;
        a->path = path;
        a->scale = scale;
        return std::shared_ptr<const pagoda::lora::Adapter>(a);
    };
    pagoda::server::LoraRegistry r(loader, 2, true);
    r.load("x", "px");
    r.load("y", "py");
    const auto held = r.resolve("x", {});  // x in use: not evictable
    r.load("z", "pz");                     // 3 resident > 2: y (idle, older than z) goes
    EXPECT_EQ(r.resident(), 2u);
    EXPECT_EQ(loads, 3);
    EXPECT_EQ(r.resolve("y", {}).adapter->path, "py");  // read again
    EXPECT_EQ(loads, 4);
    r.unload("x");
    EXPECT_EQ(r.resolve("", {{.id = 2, .scale = 0.5}}).adapter->name, "z");  // z kept its id
    EXPECT_FLOAT_EQ(r.resolve("", {{.id = 2, .scale = 0.5}}).scale, 0.5f);
    EXPECT_THROW(r.resolve("", {{.id = 0}}), pagoda::server::ApiError);  // x is gone
    EXPECT_EQ(held.adapter->name, "x");  // a request holding it keeps it
}

}  // namespace

// On a server with API keys, loading and unloading adapters takes an admin key; listing them and
// using them takes any key.
TEST(ServeLora, RuntimeLoadingNeedsAnAdminKeyWhenTheServerHasKeys) {
    ServeProcess server({"--lora", "a=" + adapters().a, "--allow-runtime-lora", "--api-key", "user-key", "--admin-key",
                         "admin-key", "--open-health"});
    const json load_c = {{"lora_name", "c"}, {"lora_path", adapters().c}};
    const auto as = [](const std::string& key) { return std::vector<std::string>{"Authorization: Bearer " + key}; };
    const HttpResult user = http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump(), as("user-key"));
    EXPECT_EQ(user.status, 403) << user.body;
    EXPECT_NE(user.body.find("admin_key_required"), std::string::npos) << user.body;
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump()).status, 401);
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/load_lora_adapter", load_c.dump(), as("admin-key")).status, 200);
    EXPECT_EQ(http_request(server.port(), "GET", "/lora-adapters", "", as("user-key")).status, 200);
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/unload_lora_adapter", json{{"lora_name", "c"}}.dump(),
                           as("user-key")).status,
              403);
    EXPECT_EQ(http_request(server.port(), "POST", "/v1/unload_lora_adapter", json{{"lora_name", "c"}}.dump(),
                           as("admin-key")).status,
              200);
}
