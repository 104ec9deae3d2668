// StepModel::set_op_times on the graph model: every op of every timed step is counted under its
// name (the graph's own op counts, once per step), the ops' time lies within the steps' time, timing
// stops when the timer is cleared, and timing does not change a single logit.
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <sstream>

#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

std::string tiny_model() {
    RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 128; spec.vocab_size = 300;
    spec.seed = 5;
    const std::string path = test::temp_path("op_times.gguf");
    write_random_model(spec, nullptr, path);
    return path;
}

// "add 1, attention 2, ..." -> {add: 1, attention: 2, ...}
std::map<std::string, int64_t> parse_counts(const std::string& counts) {
    std::map<std::string, int64_t> out;
    std::istringstream in(counts);
    std::string name, n;
    while (in >> name >> n) out[name] = std::stoll(n);  // n keeps its trailing ',', which stoll ignores
    return out;
}

std::vector<float> run_steps(StepModel& model, OpTimes* times) {
    model.set_op_times(times);
    SequenceRunner runner(model, false);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 9; ++i) prompt.push_back((i * 37 + 3) % 300);
    std::vector<float> logits = runner.prefill(0, prompt, 64, true);  // one step
    for (int32_t t : {4, 8, 15}) {                                    // three more
        const auto row = runner.decode(0, t);
        logits.insert(logits.end(), row.begin(), row.end());
    }
    model.set_op_times(nullptr);
    return logits;
}

TEST(OpTimes, EveryOpOfEveryTimedStepIsCountedAndTimingChangesNoLogit) {
    const std::string path = tiny_model();
    auto model = open_step_model(path, {.threads = 2, .tokens_wanted = 64});
    const auto per_step = parse_counts(model->op_counts());
    ASSERT_FALSE(per_step.empty());

    OpTimes times;
    const std::vector<float> timed = run_steps(*model, &times);
    EXPECT_EQ(times.steps, 4);
    ASSERT_EQ(times.by_op.size(), per_step.size());
    for (const auto& [name, count] : per_step) {
        ASSERT_TRUE(times.by_op.count(name)) << name;
        EXPECT_EQ(times.by_op.at(name).calls, 4 * count) << name;
        EXPECT_GE(times.by_op.at(name).seconds, 0.0) << name;
    }
    EXPECT_GT(times.by_op.at("attention").seconds, 0.0);
    EXPECT_GT(times.op_seconds(), 0.0);
    EXPECT_LE(times.op_seconds(), times.step_seconds);

    // The same ops by the weight they stream, each call with the weight's f32 bytes (dim 64; q 64,
    // k and v 32; FFN 128; vocab 300): 2 layers' worth a step, one output head.
    const std::map<std::string, std::pair<int64_t, double>> weights = {
        {"attention q|k|v", {2, 128 * 64 * 4}}, {"attention output", {2, 64 * 64 * 4}},
        {"ffn gate|up", {2, 256 * 64 * 4}},     {"ffn down", {2, 64 * 128 * 4}},
        {"output head", {1, 300 * 64 * 4}}};
    ASSERT_EQ(times.by_weight.size(), weights.size());
    double weight_seconds = 0;
    for (const auto& [name, expected] : weights) {
        ASSERT_TRUE(times.by_weight.count(name)) << name;
        const OpTimes::Entry& e = times.by_weight.at(name);
        EXPECT_EQ(e.calls, 4 * expected.first) << name;
        EXPECT_EQ(e.weight_bytes, double(e.calls) * expected.second) << name;
        weight_seconds += e.seconds;
    }
    EXPECT_LE(weight_seconds, times.op_seconds());

    // Cleared: the same steps again add nothing, and give bitwise the same logits.
    const OpTimes before = times;
    auto again_model = open_step_model(path, {.threads = 2, .tokens_wanted = 64});
    const std::vector<float> untimed = run_steps(*again_model, nullptr);
    EXPECT_EQ(times.steps, before.steps);
    ASSERT_EQ(untimed.size(), timed.size());
    EXPECT_EQ(std::memcmp(untimed.data(), timed.data(), timed.size() * sizeof(float)), 0);
    run_steps(*model, nullptr);
    EXPECT_EQ(times.steps, before.steps);
    EXPECT_EQ(times.step_seconds, before.step_seconds);
}

}  // namespace
}  // namespace pagoda::model
