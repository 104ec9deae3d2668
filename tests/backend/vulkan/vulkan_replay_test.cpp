// Command-buffer replay (vk_context.h's Stream, PAGODA_VULKAN_REPLAY): a decode step's command buffer
// is recorded once and resubmitted on later steps whose commands are identical. The oracle is the
// same run with replay off (every step encoded anew): greedy tokens and every logit bitwise equal,
// over decode steps with growing context (block tables that outgrow their stride), several batch
// sizes, and sequences joining and leaving. The replay counters are checked exactly: one recording
// per distinct step shape (tokens, logit rows, table stride), every repeat a replay. And the host
// time per decode step with and without replay (what docs/benchmarks.md quotes): a replayed step
// encodes nothing.
#include <bit>
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <set>
#include <string>
#include <tuple>

#ifdef PAGODA_HAVE_VULKAN  // the stream counters exist only where the backend is built
#include "backend/vulkan/vk_context.h"
#endif
#include "backend/vulkan/vulkan_test_env.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

#ifdef PAGODA_HAVE_VULKAN

using backend::vulkan::Stream;
constexpr int32_t kBlock = 4;

// Sets an environment variable (nullptr: unsets it) for one scope, then restores what the environment
// had (a backend reads PAGODA_VULKAN_REPLAY and PAGODA_VULKAN_BUCKETS when it is made).
struct ScopedEnv {
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* was = std::getenv(name)) had_ = true, was_ = was;
        value ? setenv(name, value, 1) : unsetenv(name);
    }
    ~ScopedEnv() { had_ ? setenv(name_, was_.c_str(), 1) : unsetenv(name_); }
    const char* name_;
    bool had_ = false;
    std::string was_;
};
struct ReplayEnv : ScopedEnv {
    explicit ReplayEnv(const char* value) : ScopedEnv("PAGODA_VULKAN_REPLAY", value) {}
};

struct Seq {
    std::vector<int32_t> tokens;  // prompt, then generated
    int32_t first_block = 0;      // owns blocks [first_block, first_block + 16)
    int32_t computed = 0;
};

// What a run produced, step by step, and the shape of each step (what its commands depend on).
struct Run {
    std::vector<std::vector<float>> logits;
    std::vector<std::tuple<size_t, size_t, uint32_t>> shapes;  // tokens, logit rows, table stride
    std::vector<std::vector<int32_t>> tokens;                   // each sequence's tokens at the end
    uint64_t recordings = 0, replays = 0;
};

std::shared_ptr<const gguf::File> model_file(const std::string& arch) {
    RandomModelSpec s;
    s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300; s.seed = 21;
    s.arch = arch;
    if (arch == "qwen3moe") s.n_experts = 4, s.expert_ffn_dim = 32, s.head_dim = 16;
    const std::string path = test::temp_path("vulkan_replay_" + arch + ".gguf");
    write_random_model(s, nullptr, path);
    return std::shared_ptr<const gguf::File>(gguf::File::open(path));
}

// One step: every token of `seqs` not yet computed; each table as long as the sequence's context
// needs (so it grows with decoding); logits for each sequence's last token, then greedy tokens.
void step(StepModel& model, std::vector<Seq*> seqs, Run& run) {
    Batch b;
    size_t longest = 1;
    for (Seq* s : seqs) {
        const int32_t len = int32_t(s->tokens.size());
        std::vector<int32_t> table;
        for (int32_t i = 0; i < (len + kBlock - 1) / kBlock; ++i) table.push_back(s->first_block + i);
        longest = std::max(longest, table.size());
        const int32_t index = b.add_sequence(table);
        for (int32_t p = s->computed; p < len; ++p)
            b.add(s->tokens[size_t(p)], p, index, int64_t(s->first_block + p / kBlock) * kBlock + p % kBlock, p + 1 == len);
        s->computed = len;
    }
    run.shapes.emplace_back(b.tokens.size(), seqs.size(), uint32_t(std::bit_ceil(longest)));
    std::vector<float> logits = model.forward(b);
    const int64_t vocab = model.info().vocab_size;
    ASSERT_EQ(int64_t(logits.size()), int64_t(seqs.size()) * vocab);
    for (size_t i = 0; i < seqs.size(); ++i) {
        const float* row = logits.data() + int64_t(i) * vocab;
        seqs[i]->tokens.push_back(int32_t(std::max_element(row, row + vocab) - row));
    }
    run.logits.push_back(std::move(logits));
}

// Two sequences prefilled together and decoded, a third joining (its prompt in a decode step) and
// decoding with them, the first leaving: batch sizes 2, 3 and 2 again, contexts from 5 to ~40 tokens.
Run run(const std::shared_ptr<const gguf::File>& file, const char* replay) {
    ReplayEnv env(replay);
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f16}, .tokens_wanted = 256});
    Run r;
    Seq a{{5, 17, 42, 7, 99}, 0}, b{{1, 2, 3, 4, 5, 6, 7, 8, 9}, 16}, c{{200, 100, 50, 25, 12, 6, 3}, 32};
    const uint64_t recordings = Stream::recordings(), replays = Stream::replays();
    step(*model, {&a, &b}, r);
    for (int i = 0; i < 12; ++i) step(*model, {&a, &b}, r);
    step(*model, {&a, &c, &b}, r);  // c's prompt joins a and b's decode
    for (int i = 0; i < 12; ++i) step(*model, {&a, &c, &b}, r);
    for (int i = 0; i < 10; ++i) step(*model, {&c, &b}, r);  // a left
    r.recordings = Stream::recordings() - recordings;
    r.replays = Stream::replays() - replays;
    r.tokens = {a.tokens, b.tokens, c.tokens};
    return r;
}

void expect_replay_equals_recording(const std::string& arch) {
    const auto file = model_file(arch);
    const Run encoded = run(file, "0"), replayed = run(file, "1");
    EXPECT_EQ(encoded.recordings, 0u) << "replay off keeps no command buffer";
    EXPECT_EQ(encoded.replays, 0u);
    ASSERT_EQ(encoded.logits.size(), replayed.logits.size());
    for (size_t s = 0; s < encoded.logits.size(); ++s) {
        ASSERT_EQ(encoded.logits[s].size(), replayed.logits[s].size());
        ASSERT_EQ(std::memcmp(encoded.logits[s].data(), replayed.logits[s].data(), encoded.logits[s].size() * 4), 0)
            << arch << " step " << s << ": replayed logits differ from encoded ones";
    }
    EXPECT_EQ(encoded.tokens, replayed.tokens);
    // One recording per distinct step shape (fewer than the cache holds), every other step a replay.
    const std::set<std::tuple<size_t, size_t, uint32_t>> shapes(replayed.shapes.begin(), replayed.shapes.end());
    ASSERT_LT(shapes.size(), Stream::kReplayCacheSize);
    EXPECT_EQ(replayed.recordings, shapes.size()) << arch;
    EXPECT_EQ(replayed.replays, replayed.shapes.size() - shapes.size()) << arch;
    EXPECT_GE(replayed.replays, replayed.shapes.size() / 2) << arch << ": most decode steps replay";
}

TEST(VulkanReplay, ReplayedStepsEqualEncodedOnesBitwise) {
    PAGODA_REQUIRE_VULKAN();
    expect_replay_equals_recording("llama");
}

// The mixture of experts: its expert GEMMs are indirect dispatches whose grids a device shader wrote.
TEST(VulkanReplay, MixtureOfExpertsReplays) {
    PAGODA_REQUIRE_VULKAN();
    expect_replay_equals_recording("qwen3moe");
}

// Replay buckets (vulkan_step_inputs.h): for each batch size 1..12, a prefill of 5 tokens per sequence
// and 3 decode steps (tables of a fixed 4 blocks). Counts the recordings the decode steps make.
struct Sweep {
    std::vector<std::vector<float>> logits;
    uint64_t decode_recordings = 0;
};
Sweep sweep(const std::shared_ptr<const gguf::File>& file, const char* replay, const char* buckets) {
    ReplayEnv env(replay);
    ScopedEnv bucket_env("PAGODA_VULKAN_BUCKETS", buckets);
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = 16, .dtype = kv::KvDtype::f16}, .tokens_wanted = 1024});
    const int64_t vocab = model->info().vocab_size;
    Sweep r;
    for (int batch = 1; batch <= 12; ++batch) {
        std::vector<Seq> seqs(static_cast<size_t>(batch));
        for (int i = 0; i < batch; ++i) seqs[size_t(i)] = {{1 + batch, 2 + i, 30, 40, 50}, 4 * i};
        for (int s = 0; s < 4; ++s) {
            Batch b;
            for (Seq& q : seqs) {
                const int32_t index = b.add_sequence({q.first_block, q.first_block + 1, q.first_block + 2, q.first_block + 3});
                const int32_t len = int32_t(q.tokens.size());
                for (int32_t p = q.computed; p < len; ++p) b.add(q.tokens[size_t(p)], p, index, int64_t(q.first_block) * 16 + p, p + 1 == len);
                q.computed = len;
            }
            const uint64_t before = Stream::recordings();
            std::vector<float> logits = model->forward(b);
            if (s > 0) r.decode_recordings += Stream::recordings() - before;
            for (size_t i = 0; i < seqs.size(); ++i) {
                const float* row = logits.data() + int64_t(i) * vocab;
                seqs[i].tokens.push_back(int32_t(std::max_element(row, row + vocab) - row));
            }
            r.logits.push_back(std::move(logits));
        }
    }
    return r;
}

// Decode steps of 1..12 sequences record one command buffer per bucket (1, 2, 4, 8, 16), where exact
// steps record one per batch size, and every logit is bitwise that of exact, unreplayed steps.
TEST(VulkanReplay, BucketsServeEveryBatchSizeBitwise) {
    PAGODA_REQUIRE_VULKAN();
    const auto file = model_file("llama");
    const Sweep plain = sweep(file, "0", "0"), exact = sweep(file, "1", "0"), bucketed = sweep(file, "1", "1");
    ASSERT_EQ(plain.logits.size(), bucketed.logits.size());
    for (size_t s = 0; s < plain.logits.size(); ++s) {
        ASSERT_EQ(plain.logits[s].size(), bucketed.logits[s].size());
        ASSERT_EQ(std::memcmp(plain.logits[s].data(), bucketed.logits[s].data(), plain.logits[s].size() * 4), 0) << "step " << s;
        ASSERT_EQ(std::memcmp(plain.logits[s].data(), exact.logits[s].data(), plain.logits[s].size() * 4), 0) << "step " << s;
    }
    EXPECT_EQ(plain.decode_recordings, 0u);
    EXPECT_EQ(bucketed.decode_recordings, 5u) << "buckets 1, 2, 4, 8 and 16";
    EXPECT_GE(exact.decode_recordings, 12u) << "one per batch size";
}

TEST(VulkanReplay, RefusesAnUnknownBucketSwitchValue) {
    PAGODA_REQUIRE_VULKAN();
    ScopedEnv env("PAGODA_VULKAN_BUCKETS", "2");
    try {
        backend::make_backend("vulkan");
        FAIL() << "PAGODA_VULKAN_BUCKETS=2 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PAGODA_VULKAN_BUCKETS"), std::string::npos) << e.what();
    }
}

struct StepTimes {
    double wall = 0, thread_cpu = 0, encode = 0, device = 0;  // seconds per step
    double dispatches = 0;                                     // per step
    uint64_t recordings = 0;
    std::vector<std::vector<float>> logits;
};

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// stories260K, `batch` sequences of 8 prompt tokens, then `steps` decode steps timed after 2 warm
// ones. Each table is 4 blocks of 16 throughout, so every timed step has the same shape.
StepTimes time_decode(const char* replay, int batch, int steps, const char* buckets = "1") {
    ReplayEnv env(replay);
    ScopedEnv bucket_env("PAGODA_VULKAN_BUCKETS", buckets);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(test::fixture("models/stories260K.gguf")));
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = 16, .dtype = kv::KvDtype::f16}, .tokens_wanted = 1024});
    const int64_t vocab = model->info().vocab_size;
    std::vector<Seq> seqs(static_cast<size_t>(batch));
    for (int i = 0; i < batch; ++i) seqs[size_t(i)] = {{1, 2 + i, 30, 40, 50, 60, 70, 80}, 4 * i};
    StepTimes t;
    for (int s = 0; s < steps + 3; ++s) {
        if (s == 3) {
            t.wall = -std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
            t.thread_cpu = -thread_cpu_seconds();
            t.encode = -Stream::encode_seconds();
            t.device = -Stream::device_seconds();
            t.recordings = Stream::recordings();
            t.dispatches = -double(Stream::all_dispatches());
        }
        Batch b;
        for (Seq& q : seqs) {
            const int32_t index = b.add_sequence({q.first_block, q.first_block + 1, q.first_block + 2, q.first_block + 3});
            const int32_t len = int32_t(q.tokens.size());
            for (int32_t p = q.computed; p < len; ++p)
                b.add(q.tokens[size_t(p)], p, index, int64_t(q.first_block) * 16 + p, p + 1 == len);
            q.computed = len;
        }
        std::vector<float> logits = model->forward(b);
        for (size_t i = 0; i < seqs.size(); ++i) {
            const float* row = logits.data() + int64_t(i) * vocab;
            seqs[i].tokens.push_back(int32_t(std::max_element(row, row + vocab) - row));
        }
        t.logits.push_back(std::move(logits));
    }
    t.wall = (t.wall + std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count()) / steps;
    t.thread_cpu = (t.thread_cpu + thread_cpu_seconds()) / steps;
    t.encode = (t.encode + Stream::encode_seconds()) / steps;
    t.device = (t.device + Stream::device_seconds()) / steps;
    t.recordings = Stream::recordings() - t.recordings;
    t.dispatches = (t.dispatches + double(Stream::all_dispatches())) / steps;
    return t;
}

TEST(VulkanReplay, HostTimePerDecodeStep) {
    PAGODA_REQUIRE_VULKAN();
    for (int batch : {1, 4}) {
        const StepTimes off = time_decode("0", batch, 40), on = time_decode("1", batch, 40);
        ASSERT_EQ(off.logits.size(), on.logits.size());
        for (size_t s = 0; s < off.logits.size(); ++s)
            ASSERT_EQ(std::memcmp(off.logits[s].data(), on.logits[s].data(), off.logits[s].size() * 4), 0) << "step " << s;
        EXPECT_EQ(on.recordings, 0u) << "every timed step has one shape, recorded before the timing";
        EXPECT_EQ(on.encode, 0.0) << "a replayed step encodes no Vulkan command";
        EXPECT_GT(off.encode, 0.0);
        for (const auto& [name, t] : {std::pair{"encoded", off}, std::pair{"replayed", on}})
            std::cout << fmt::format("stories260K batch {} {:>8}: wall {:.3f} ms/step, calling thread CPU {:.3f} ms, of which encoding "
                                     "{:.3f} ms; submit to fence {:.3f} ms; host outside submit {:.3f} ms\n",
                                     batch, name, t.wall * 1e3, t.thread_cpu * 1e3, t.encode * 1e3, t.device * 1e3,
                                     (t.wall - t.device) * 1e3);
    }
}

// The table in docs/benchmarks.md: per decode step of stories260K, dispatches and wall time encoded
// every step, replayed at the exact batch size and replayed in buckets (3 and 6 sequences pad to 4 and
// 8). Logits equal in all three.
TEST(VulkanReplay, BucketTimesPerDecodeStep) {
    PAGODA_REQUIRE_VULKAN();
    for (int batch : {1, 3, 4, 6}) {
        const StepTimes off = time_decode("0", batch, 30, "0"), exact = time_decode("1", batch, 30, "0"),
                        buckets = time_decode("1", batch, 30, "1");
        for (const StepTimes* t : {&exact, &buckets})
            for (size_t s = 0; s < off.logits.size(); ++s)
                ASSERT_EQ(std::memcmp(off.logits[s].data(), t->logits[s].data(), off.logits[s].size() * 4), 0) << "step " << s;
        EXPECT_EQ(buckets.recordings, 0u);
        EXPECT_EQ(buckets.dispatches, off.dispatches) << "padding adds rows, not dispatches";
        for (const auto& [name, t] : {std::pair{"encoded", off}, std::pair{"replayed", exact}, std::pair{"bucketed", buckets}})
            std::cout << fmt::format("stories260K batch {} {:>8}: {:.0f} dispatches/step, wall {:.3f} ms/step, encoding {:.3f} ms, "
                                     "submit to fence {:.3f} ms\n",
                                     batch, name, t.dispatches, t.wall * 1e3, t.encode * 1e3, t.device * 1e3);
    }
}

TEST(VulkanReplay, DescribeNamesTheSwitch) {
    PAGODA_REQUIRE_VULKAN();
    {
        ReplayEnv env("0");
        EXPECT_NE(backend::make_backend("vulkan")->describe().find("step replay off"), std::string::npos);
    }
    ReplayEnv unset(nullptr);
    EXPECT_NE(backend::make_backend("vulkan")->describe().find("step replay on"), std::string::npos) << "on by default";
}

TEST(VulkanReplay, RefusesAnUnknownSwitchValue) {
    PAGODA_REQUIRE_VULKAN();
    ReplayEnv env("yes");
    try {
        backend::make_backend("vulkan");
        FAIL() << "PAGODA_VULKAN_REPLAY=yes was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PAGODA_VULKAN_REPLAY"), std::string::npos) << e.what();
    }
}

#endif  // PAGODA_HAVE_VULKAN

}  // namespace
}  // namespace pagoda::model
