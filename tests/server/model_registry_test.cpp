// ModelRegistry (server/model_registry.h) with a fake factory: the state machine, LRU eviction
// within the budget, busy models never unloaded, failures, and reloads that swap versions only
// when the new one is loaded and free the old one once its requests are done.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "core/error.h"
#include "server/model_registry.h"

namespace pagoda::server {
namespace {

using namespace std::chrono_literals;

struct FakeModel : ServedModel {
    FakeModel(std::string path, std::atomic<int>& alive) : path(std::move(path)), alive(alive) { ++alive; }
    ~FakeModel() override { --alive; }
    int64_t in_flight() const override { return busy.load(); }
    std::string path;
    std::atomic<int64_t> busy{0};
    std::atomic<int>& alive;
};

// Builds FakeModels; a path containing "bad" fails; while `gate` is closed, loads block.
struct FakeFactory {
    std::atomic<int> alive{0}, loads{0};
    std::mutex mutex;
    std::condition_variable cv;
    bool open = true;

    void close_gate() {
        std::lock_guard lock(mutex);
        open = false;
    }
    void open_gate() {
        {
            std::lock_guard lock(mutex);
            open = true;
        }
        cv.notify_all();
    }
    ModelFactory factory() {
        return [this](const ModelSource& s) -> std::shared_ptr<ServedModel> {
            std::unique_lock lock(mutex);
            cv.wait(lock, [&] { return open; });
            ++loads;
            if (s.path.find("bad") != std::string::npos) fail("cannot open '{}'", s.path);
            return std::make_shared<FakeModel>(s.path, alive);
        };
    }
};

MemoryEstimate size_100() {
    return [](const ModelSource&) { return int64_t(100); };
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(2ms);
    }
    return pred();
}

std::shared_ptr<FakeModel> acquire_loaded(ModelRegistry& r, const std::string& id) {
    std::shared_ptr<ServedModel> got;
    EXPECT_TRUE(eventually([&] { return (got = r.acquire(id).model) != nullptr; })) << id << " never loaded";
    return std::static_pointer_cast<FakeModel>(got);
}

ModelState state_of(const ModelRegistry& r, const std::string& id) { return r.status(id)->state; }

TEST(ModelRegistry, LoadsOnFirstAcquireAndReportsEachState) {
    FakeFactory f;
    ModelRegistry r({{"a", "a.gguf", {}}, {"b", "b.gguf", "a"}}, f.factory(), size_100(), 0);
    EXPECT_EQ(r.ids(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    EXPECT_EQ(r.status("b")->source.parent, "a");
    f.close_gate();
    auto first = r.acquire("a");
    EXPECT_EQ(first.model, nullptr);
    EXPECT_EQ(first.state, ModelState::loading);
    EXPECT_EQ(state_of(r, "a"), ModelState::loading);
    EXPECT_TRUE(eventually([&] { return r.used_bytes() == 100; }));  // a load under way counts
    f.open_gate();
    auto a = acquire_loaded(r, "a");
    EXPECT_EQ(a->path, "a.gguf");
    EXPECT_EQ(state_of(r, "a"), ModelState::loaded);
    EXPECT_EQ(r.status("a")->version, 1u);
    EXPECT_EQ(r.acquire("a").model, a);  // the same instance while it stays loaded
    EXPECT_EQ(f.loads, 1);
    EXPECT_EQ(state_of(r, "b"), ModelState::unloaded);
    EXPECT_THROW(r.acquire("c"), Error);
    EXPECT_FALSE(r.contains("c"));
}

TEST(ModelRegistry, WaitCountsRequestsHeldForALoad) {
    FakeFactory f;
    ModelRegistry r({{"a", "a.gguf", {}}}, f.factory(), size_100(), 0);
    auto w1 = r.wait("a");
    {
        auto w2 = r.wait("a");
        EXPECT_EQ(r.waiting("a"), 2);
        EXPECT_EQ(r.status("a")->waiting, 2);
    }
    EXPECT_EQ(r.waiting("a"), 1);
    w1.reset();
    EXPECT_EQ(r.waiting("a"), 0);
}

TEST(ModelRegistry, RefusesABudgetSmallerThanOneModelAndDuplicateIds) {
    FakeFactory f;
    try {
        ModelRegistry r({{"a", "a.gguf", {}}}, f.factory(), [](const ModelSource&) { return int64_t(300) << 20; },
                        int64_t(200) << 20);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "the model 'a' needs about 300 MiB, more than the whole --models-memory budget of 200 MiB");
    }
    EXPECT_THROW(ModelRegistry({{"a", "x", {}}, {"a", "y", {}}}, f.factory(), size_100(), 0), Error);
    EXPECT_THROW(ModelRegistry({}, f.factory(), size_100(), 0), Error);
}

TEST(ModelRegistry, UnloadsTheLeastRecentlyUsedIdleModelToStayWithinTheBudget) {
    FakeFactory f;
    ModelRegistry r({{"a", "a", {}}, {"b", "b", {}}, {"c", "c", {}}}, f.factory(), size_100(), 250);
    acquire_loaded(r, "a");
    acquire_loaded(r, "b");
    r.acquire("a");  // a is now more recently used than b
    acquire_loaded(r, "c");
    EXPECT_EQ(state_of(r, "a"), ModelState::loaded);
    EXPECT_EQ(state_of(r, "b"), ModelState::unloaded);
    EXPECT_EQ(state_of(r, "c"), ModelState::loaded);
    EXPECT_TRUE(eventually([&] { return f.alive == 2; }));  // b freed: nobody holds it
    EXPECT_LE(r.used_bytes(), 250);
    // b again: now a is the least recently used one.
    acquire_loaded(r, "b");
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    EXPECT_TRUE(eventually([&] { return f.alive == 2; }));
    EXPECT_EQ(f.loads, 4);
}

TEST(ModelRegistry, NeverUnloadsABusyModelAndWaitsForOneToBeIdle) {
    FakeFactory f;
    ModelRegistry r({{"a", "a", {}}, {"b", "b", {}}, {"c", "c", {}}}, f.factory(), size_100(), 200);
    auto a = acquire_loaded(r, "a");
    auto b = acquire_loaded(r, "b");
    a->busy = 1;
    b->busy = 1;
    a.reset();
    EXPECT_EQ(r.acquire("c").state, ModelState::loading);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(state_of(r, "c"), ModelState::loading);  // no room: both are busy
    EXPECT_EQ(state_of(r, "a"), ModelState::loaded);
    EXPECT_EQ(state_of(r, "b"), ModelState::loaded);
    EXPECT_LE(r.used_bytes(), 200);
    b->busy = 0;  // b's request finished; the one holding it lets go
    b.reset();
    acquire_loaded(r, "c");
    EXPECT_EQ(state_of(r, "b"), ModelState::unloaded);
    EXPECT_EQ(state_of(r, "a"), ModelState::loaded);
    EXPECT_TRUE(eventually([&] { return f.alive == 2; }));
}

TEST(ModelRegistry, AnUnloadedInstanceLivesAndCountsWhileARequestHoldsIt) {
    FakeFactory f;
    ModelRegistry r({{"a", "a", {}}, {"b", "b", {}}}, f.factory(), size_100(), 100);
    auto a = acquire_loaded(r, "a");  // held by a request about to start on it (busy 0)
    r.acquire("b");                   // a is idle, so it is unloaded to make room...
    ASSERT_TRUE(eventually([&] { return state_of(r, "a") == ModelState::unloaded; }));
    EXPECT_EQ(r.retired_count(), 1u);  // ...but lives on while held, and still counts
    EXPECT_EQ(f.alive, 1);
    a->busy = 1;  // the request started
    a.reset();
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(f.alive, 1);  // still running its request
    EXPECT_EQ(state_of(r, "b"), ModelState::loading);  // no room until a is freed
    EXPECT_LE(r.used_bytes(), 100);
    static_cast<FakeModel&>(*r.instances().back()).busy = 0;
    acquire_loaded(r, "b");
    EXPECT_EQ(r.retired_count(), 0u);
    EXPECT_EQ(f.alive, 1);
    EXPECT_EQ(r.used_bytes(), 100);
}

TEST(ModelRegistry, AFailedLoadIsReportedThenRetried) {
    FakeFactory f;
    ModelRegistry r({{"a", "bad.gguf", {}}}, f.factory(), size_100(), 0);
    r.acquire("a");
    ASSERT_TRUE(eventually([&] { return state_of(r, "a") == ModelState::failed; }));
    auto got = r.acquire("a", 10s);
    EXPECT_EQ(got.state, ModelState::failed);
    EXPECT_EQ(got.error, "cannot open 'bad.gguf'");
    EXPECT_EQ(r.status("a")->error, "cannot open 'bad.gguf'");
    EXPECT_EQ(r.used_bytes(), 0);
    EXPECT_EQ(r.acquire("a", 0ms).state, ModelState::loading);  // the hold is over: retried
    ASSERT_TRUE(eventually([&] { return f.loads == 2 && state_of(r, "a") == ModelState::failed; }));
    // A reload with a good path clears the failure; the next acquire loads it.
    r.reload("a", "good.gguf");
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    EXPECT_EQ(acquire_loaded(r, "a")->path, "good.gguf");
}

TEST(ModelRegistry, AReloadSwapsOnlyOnceTheNewVersionIsLoaded) {
    FakeFactory f;
    ModelRegistry r({{"a", "v1", {}}}, f.factory(), size_100(), 0);
    auto old = acquire_loaded(r, "a");
    old->busy = 1;  // a request in flight on version 1
    f.close_gate();
    EXPECT_TRUE(r.reload("a", "v2"));
    EXPECT_FALSE(r.reload("a"));  // merged into the one under way
    ASSERT_TRUE(eventually([&] { return r.status("a")->reloading; }));
    EXPECT_EQ(r.acquire("a").model, old);  // still version 1 while version 2 loads
    EXPECT_TRUE(eventually([&] { return r.used_bytes() == 200; }));  // both versions count
    f.open_gate();
    ASSERT_TRUE(eventually([&] { return r.status("a")->version == 2; }));
    auto now = std::static_pointer_cast<FakeModel>(r.acquire("a").model);
    EXPECT_EQ(now->path, "v2");
    EXPECT_EQ(r.status("a")->source.path, "v2");
    EXPECT_FALSE(r.status("a")->reloading);
    old.reset();
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(f.alive, 2);  // version 1 finishes its request first
    EXPECT_EQ(r.retired_count(), 1u);
    static_cast<FakeModel&>(*r.instances().back()).busy = 0;
    EXPECT_TRUE(eventually([&] { return f.alive == 1 && r.retired_count() == 0; }));
    EXPECT_EQ(r.used_bytes(), 100);
}

TEST(ModelRegistry, AFailedReloadKeepsTheOldVersionServing) {
    FakeFactory f;
    ModelRegistry r({{"a", "v1", {}}}, f.factory(), size_100(), 0);
    auto v1 = acquire_loaded(r, "a");
    r.reload("a", "bad-v2");
    ASSERT_TRUE(eventually([&] { return !r.status("a")->error.empty(); }));
    EXPECT_EQ(state_of(r, "a"), ModelState::loaded);
    EXPECT_EQ(r.acquire("a").model, v1);
    EXPECT_EQ(r.status("a")->source.path, "v1");
    EXPECT_EQ(r.status("a")->version, 1u);
    EXPECT_EQ(r.status("a")->error, "cannot open 'bad-v2'");
    EXPECT_THROW(r.reload("zz"), Error);
}

TEST(ModelRegistry, AReloadOfAModelNotLoadedTakesThePathForItsNextLoad) {
    FakeFactory f;
    ModelRegistry r({{"a", "v1", {}}}, f.factory(), size_100(), 0);
    r.reload("a", "v2");
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    EXPECT_EQ(f.loads, 0);
    EXPECT_EQ(acquire_loaded(r, "a")->path, "v2");
}

TEST(ModelRegistry, UnloadFreesAnIdleModelOnly) {
    FakeFactory f;
    ModelRegistry r({{"a", "a", {}}}, f.factory(), size_100(), 0);
    EXPECT_FALSE(r.unload("a"));  // not loaded
    auto a = acquire_loaded(r, "a");
    a->busy = 1;
    EXPECT_FALSE(r.unload("a"));
    a->busy = 0;
    a.reset();
    EXPECT_TRUE(r.unload("a"));
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    EXPECT_EQ(f.alive, 0);
    EXPECT_EQ(r.used_bytes(), 0);
}

}  // namespace
}  // namespace pagoda::server

namespace pagoda::server {
namespace {

TEST(ModelRegistry, ALoadGrowingMemoryBeyondItsEstimateIsCountedAtItsGrowth) {
    FakeFactory f;
    std::atomic<int64_t> resident{1000};
    ModelFactory grows = [&, inner = f.factory()](const ModelSource& s) {
        resident += s.id == "a" ? 150 : 20;  // a takes more than estimated, b less
        return inner(s);
    };
    ModelRegistry r({{"a", "a", {}}, {"b", "b", {}}}, grows, size_100(), 0, [&] { return resident.load(); });
    EXPECT_EQ(r.status("a")->memory_bytes, 100);  // estimated until loaded
    acquire_loaded(r, "a");
    EXPECT_EQ(r.status("a")->memory_bytes, 150);
    acquire_loaded(r, "b");
    EXPECT_EQ(r.status("b")->memory_bytes, 100);  // never below the estimate
    EXPECT_EQ(r.used_bytes(), 250);
}

TEST(ModelRegistry, AModelMeasuredLargerThanTheBudgetIsRefusedNotWaitedForForEver) {
    FakeFactory f;
    std::atomic<int64_t> resident{0};
    ModelFactory grows = [&, inner = f.factory()](const ModelSource& s) {
        resident += int64_t(300) << 20;  // measured at 300 MiB, estimated at 100
        return inner(s);
    };
    ModelRegistry r({{"a", "a", {}}, {"b", "b", {}}}, grows, [](const ModelSource&) { return int64_t(100) << 20; },
                    int64_t(200) << 20, [&] { return resident.load(); });
    acquire_loaded(r, "a");
    acquire_loaded(r, "b");  // a unloads for b; a's next load needs 300 MiB of a 200 MiB budget
    EXPECT_EQ(state_of(r, "a"), ModelState::unloaded);
    r.acquire("a");
    ASSERT_TRUE(eventually([&] { return state_of(r, "a") == ModelState::failed; }));
    EXPECT_EQ(r.status("a")->error,
              "the model 'a' took 300 MiB at its last load, more than the whole --models-memory budget of 200 MiB");
}

}  // namespace
}  // namespace pagoda::server
