// The gateway over an injected ModelLoader: the loading / ready / failed states it reports while
// the loader runs or after it fails, the engine options it hands the loader (scheduler settings
// and metric hooks), and a completion end to end through a scripted fake model.
#include "server/gateway.h"

#include <condition_variable>
#include <filesystem>
#include <future>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/fake_step_model.h"
#include "server/serve_harness.h"
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

// A loader that builds an Engine over a FakeStepModel with the tokenizer's vocabulary.
LoadedModel fake_model(std::shared_ptr<const tokenizer::Tokenizer> tok, engine::EngineOptions options,
                       std::string chat_template = {}, std::chrono::milliseconds step_delay = {}) {
    auto step = std::make_unique<engine::test::FakeStepModel>(tok->n_vocab(), 64, 16, 1024);
    step->step_delay = step_delay;
    LoadedModel m;
    m.engine = std::make_unique<engine::Engine>(std::move(step), std::move(tok), std::move(options));
    m.chat_template = std::move(chat_template);
    m.description = "fake";
    return m;
}

GatewayOptions options() {
    GatewayOptions o;
    o.model_name = "fake-model";
    o.scheduler.max_seqs = 3;
    o.scheduler.max_batched_tokens = 128;
    return o;
}

ApiError start_error(Gateway& gw, const json& body) {
    try {
        gw.start(Endpoint::completions, body, nullptr, gw.new_request_id(), [](size_t, const engine::Delta&) {});
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "start() did not refuse";
    return ApiError::internal("not refused");
}

// Collects deltas from the engine thread; the test thread replays them into the Job.
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
    bool wait(std::chrono::seconds timeout) {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, timeout, [&] { return done; });
    }
};

}  // namespace

TEST(Gateway, ReportsLoadingUntilTheLoaderReturns) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    engine::EngineOptions seen;
    Gateway gw(options(), {}, [&](engine::EngineOptions o) {
        released.wait();
        seen = o;
        return fake_model(tok, std::move(o));
    });
    std::thread loader([&] { gw.load(); });

    EXPECT_EQ(gw.state(), Gateway::State::loading);
    const SimpleResponse h = gw.health();
    EXPECT_EQ(h.status, 503);
    EXPECT_EQ(json::parse(h.body)["status"], "loading");
    EXPECT_TRUE(h.retry_after.has_value());
    EXPECT_EQ(gw.liveness().status, 200);  // the process serves while the model loads
    EXPECT_EQ(gw.readiness().status, 503);
    EXPECT_EQ(json::parse(gw.readiness().body)["status"], "loading");
    const ApiError e = start_error(gw, {{"prompt", "Hi"}});
    EXPECT_EQ(e.status, 503);
    EXPECT_EQ(e.code, "model_loading");
    EXPECT_FALSE(json::parse(gw.models().body)["data"][0].contains("max_model_len"));

    release.set_value();
    loader.join();
    ASSERT_EQ(gw.state(), Gateway::State::ready);
    EXPECT_EQ(gw.health().status, 200);
    EXPECT_EQ(gw.readiness().status, 200);
    gw.begin_drain();
    EXPECT_EQ(gw.liveness().status, 200);
    EXPECT_EQ(json::parse(gw.readiness().body)["status"], "draining");
    EXPECT_EQ(seen.scheduler.max_seqs, 3);
    EXPECT_EQ(seen.scheduler.max_batched_tokens, 128);
    EXPECT_TRUE(seen.on_step && seen.on_request_finished);
    const json card = json::parse(gw.models().body)["data"][0];
    EXPECT_EQ(card["id"], "fake-model");
    EXPECT_EQ(card["max_model_len"], 1024);
    EXPECT_EQ(card["vocab_size"], tok->n_vocab());
}

TEST(Gateway, ALoaderFailureIsReportedAndRefusesRequests) {
    Gateway gw(options(), {}, [](engine::EngineOptions) -> LoadedModel { fail("cannot open 'missing.gguf'"); });
    EXPECT_THROW(gw.load(), Error);
    EXPECT_EQ(gw.state(), Gateway::State::failed);
    const SimpleResponse h = gw.health();
    EXPECT_EQ(h.status, 503);
    EXPECT_EQ(json::parse(h.body)["status"], "failed");
    EXPECT_NE(json::parse(h.body)["error"].get<std::string>().find("missing.gguf"), std::string::npos);
    const ApiError e = start_error(gw, {{"prompt", "Hi"}});
    EXPECT_EQ(e.status, 503);
    EXPECT_EQ(e.code, "model_failed");
}

TEST(Gateway, ALoaderWithoutAnEngineFailsTheLoad) {
    Gateway gw(options(), {}, [](engine::EngineOptions) { return LoadedModel{}; });
    EXPECT_THROW(gw.load(), Error);
    EXPECT_EQ(gw.state(), Gateway::State::failed);
}

TEST(Gateway, ServesACompletionThroughTheLoadedEngineAndItsHooks) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    // The model's own template is used when no --chat-template is given.
    const std::string tmpl = "{% for m in messages %}<{{ m.content }}>{% endfor %}";
    Gateway gw(options(), {}, [&](engine::EngineOptions o) { return fake_model(tok, std::move(o), tmpl); });
    gw.load();

    Collector c;
    const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon"}}})},
                       {"max_tokens", 4},
                       {"temperature", 0}};
    auto job = gw.start(Endpoint::chat_completions, body, nullptr, gw.new_request_id(), c.sink());
    ASSERT_TRUE(c.wait(std::chrono::seconds(20)));
    for (auto& [sub, d] : c.deltas) job->add(sub, d);
    ASSERT_TRUE(job->done());
    const json r = job->assembler().response();
    job->finish(200);
    EXPECT_EQ(r["model"], "fake-model");
    EXPECT_GE(r["usage"]["completion_tokens"], 1);  // the fake model may pick EOS early
    EXPECT_LE(r["usage"]["completion_tokens"], 4);
    const auto prompt = tok->encode("<Once upon>", {.add_eos = false});
    EXPECT_EQ(r["usage"]["prompt_tokens"], int64_t(prompt.size()));

    const std::string metrics = gw.metrics().body;
    EXPECT_GE(test::metric_value(metrics, "pagoda:engine_step_duration_seconds_count"), 1);  // on_step
    EXPECT_EQ(test::metric_value(metrics, "pagoda:e2e_request_latency_seconds_count"), 1);   // on_request_finished
    EXPECT_EQ(test::metric_value(metrics, "pagoda:model_ready"), 1);
}

TEST(Gateway, RequestsCutOffAtShutdownFailWithShuttingDownButClientCancelsDoNot) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    Gateway gw(options(), {}, [&](engine::EngineOptions o) {
        return fake_model(tok, std::move(o), {}, std::chrono::milliseconds(5));
    });
    gw.load();
    auto start = [&](Collector& c, int max_tokens) {
        const json body = {{"prompt", "Once"}, {"max_tokens", max_tokens}, {"ignore_eos", true}};
        return gw.start(Endpoint::completions, body, nullptr, gw.new_request_id(), c.sink());
    };
    auto finish = [](Collector& c, Job& job) {
        EXPECT_TRUE(c.wait(std::chrono::seconds(20)));
        for (auto& [sub, d] : c.deltas) job.add(sub, d);
        EXPECT_TRUE(job.done());
        return job.failure();
    };

    Collector cancelled;
    auto job = start(cancelled, 900);
    job->cancel();
    EXPECT_FALSE(finish(cancelled, *job).has_value()) << "a client's cancel is no failure";

    Collector short_c, long_c;
    auto short_job = start(short_c, 3), long_job = start(long_c, 900);
    gw.begin_drain();
    EXPECT_FALSE(finish(short_c, *short_job).has_value()) << "draining lets requests in flight finish";
    gw.cut_off_remaining();
    const std::optional<ApiError> cut = finish(long_c, *long_job);
    ASSERT_TRUE(cut.has_value());
    EXPECT_EQ(cut->status, 503);
    EXPECT_EQ(cut->code, "shutting_down");
}

// Fair share through the gateway: key `flood` queues ten requests on a one-seat engine, then key
// `quiet` sends one. Under the fair policy the quiet request runs as soon as the seat frees (it
// finishes second or third); under FCFS it finishes last. Keys claim no better priority than
// their key file's.
TEST(Gateway, FairPolicyServesAQuietKeyBesideAFloodAndBoundsPriorityPerKey) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    auto finish_order = [&](engine::SchedulingPolicy policy) {
        // Declared before the gateway: its engine may still finish (cancel) requests while it shuts down.
        std::mutex mutex;
        std::vector<std::string> order;  // key names in the order their first 11 requests finished
        GatewayOptions o = options();
        o.scheduler.max_seqs = 1;
        o.scheduler.policy = policy;
        Gateway gw(o, ApiKeyTable::parse("sk-flood-0001 name=flood\nsk-quiet-0002 name=quiet priority=-1\n", "keys"),
                   [&](engine::EngineOptions eo) { return fake_model(tok, std::move(eo), {}, std::chrono::milliseconds(2)); });
        gw.load();
        const ApiKey* flood = gw.authenticate("Bearer sk-flood-0001");
        const ApiKey* quiet = gw.authenticate("Bearer sk-quiet-0002");
        std::vector<std::shared_ptr<Job>> jobs;  // after the gateway: a job reports to it when it ends
        auto send = [&](const ApiKey* key, json body, bool counted = true) {
            body["prompt"] = "Once";
            body["max_tokens"] = 6;
            body["ignore_eos"] = true;
            jobs.push_back(gw.start(Endpoint::completions, body, key, gw.new_request_id(),
                                    [&, name = key->name, counted](size_t, const engine::Delta& d) {
                                        if (!d.request_done || !counted) return;
                                        std::lock_guard lock(mutex);
                                        order.push_back(name);
                                    }));
        };
        for (int i = 0; i < 10; ++i) send(flood, json::object());
        send(quiet, json::object());
        for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
             std::chrono::steady_clock::now() < deadline;) {
            {
                std::lock_guard lock(mutex);
                if (order.size() == 11) break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        for (auto& j : jobs) j->cancel();
        // The bound: flood may not ask for priority -1, quiet may (its key file grants -1) but not -2.
        auto refused = [&](const ApiKey* key, int priority) {
            try {
                send(key, {{"priority", priority}}, false);
            } catch (const ApiError& e) {
                EXPECT_EQ(e.param, "priority");
                EXPECT_EQ(e.status, 400);
                return true;
            }
            return false;
        };
        EXPECT_TRUE(refused(flood, -1));
        EXPECT_FALSE(refused(quiet, -1));
        EXPECT_TRUE(refused(quiet, -2));
        EXPECT_FALSE(refused(flood, 5));
        for (auto& j : jobs) j->cancel();
        std::lock_guard lock(mutex);
        EXPECT_EQ(order.size(), 11u);
        return std::find(order.begin(), order.end(), "quiet") - order.begin();
    };
    EXPECT_LE(finish_order(engine::SchedulingPolicy::fair), 2);
    EXPECT_EQ(finish_order(engine::SchedulingPolicy::fcfs), 10) << "FCFS serves the quiet key last";
}
