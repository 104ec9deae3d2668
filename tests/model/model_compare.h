// The scaffolding the random-model tests share: write a gen-model file (optionally quantised), the
// test prompt, the reference backend's logits of it (the oracle), and the CPU-against-reference
// check every architecture runs: one prefill of the whole prompt, then a second sequence fed as a
// 7-token prefill plus one decode per remaining token, each position's logits within
// `tolerance` x the largest |reference logit| of that position.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model::model_compare {

// Writes `spec` to a temp file named after `stem`; with `quant` non-empty, returns that file
// quantised to the `pagoda quantize` target instead.
inline std::string write_model(const RandomModelSpec& spec, const std::string& stem, const std::string& quant = "") {
    const std::string f = test::temp_path(stem + ".gguf");
    write_random_model(spec, nullptr, f);
    if (quant.empty()) return f;
    const std::string q = test::temp_path(stem + "_" + quant + ".gguf");
    ThreadPool pool(2);
    quant::quantize_model({.input = f, .output = q, .target = quant}, pool);
    return q;
}

// n token ids below 300 (every random test model's vocabulary); `salt` gives a different prompt.
inline std::vector<int32_t> prompt(int n, int salt = 0) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11 + salt * 101) % 300);
    return ids;
}

// The reference backend's logits of every position of `ids` (f32 KV, 4-token blocks).
inline std::vector<float> reference_logits(std::shared_ptr<const gguf::File> file, const std::vector<int32_t>& ids) {
    auto model = open_step_model(std::move(file), {.backend = "reference", .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                                   .tokens_wanted = 64});
    SequenceRunner runner(*model, false);
    return runner.prefill(0, ids, 64, true);
}

inline std::vector<float> reference_logits(const std::string& path, const std::vector<int32_t>& ids) {
    return reference_logits(std::shared_ptr<const gguf::File>(gguf::File::open(path)), ids);
}

// Runs `ids` through `model` (sequences 0 and 1 must be free) as described at the top and checks
// every position against `expected` (the reference's logits, one vocab-sized row per position),
// position p within tolerance(p) x its largest |reference logit|.
inline void expect_matches_reference(StepModel& model, const std::vector<float>& expected, const std::vector<int32_t>& ids,
                                     const std::function<double(size_t)>& tolerance) {
    const int64_t vocab = model.info().vocab_size;
    auto check = [&](const float* row, size_t pos) {
        const float* want = expected.data() + pos * size_t(vocab);
        double scale = 0;
        for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, double(std::abs(want[i])));
        for (int64_t i = 0; i < vocab; ++i)
            ASSERT_NEAR(row[i], want[i], tolerance(pos) * scale) << "position " << pos << " logit " << i;
    };
    SequenceRunner runner(model, false);
    auto logits = runner.prefill(0, ids, 64, true);
    for (size_t p = 0; p < ids.size(); ++p) check(logits.data() + p * size_t(vocab), p);
    logits = runner.prefill(1, std::span<const int32_t>(ids.data(), 7));
    check(logits.data(), 6);
    for (size_t p = 7; p < ids.size(); ++p) {
        logits = runner.decode(1, ids[p]);
        check(logits.data(), p);
    }
}

// The same with one tolerance for every position.
inline void expect_matches_reference(StepModel& model, const std::vector<float>& expected, const std::vector<int32_t>& ids,
                                     double tolerance) {
    expect_matches_reference(model, expected, ids, [tolerance](size_t) { return tolerance; });
}

// What each architecture's model test runs: the CPU backend (f32 FMA kernels, the fused graph or the
// unfused one) on `file`, as described at the top, against the reference's logits of prompt(19).
inline void expect_cpu_matches_reference(std::shared_ptr<const gguf::File> file, bool fusion, double tolerance) {
    backend::cpu::testing::KernelConfigGuard guard;  // packing (at load) follows the float method
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const KvOptions kvo{.block_size = 4, .dtype = kv::KvDtype::f32};
    auto model = open_step_model(file, {.threads = 2, .kv = kvo, .tokens_wanted = 64, .fusion = fusion});
    const std::vector<int32_t> ids = prompt(19);
    expect_matches_reference(*model, reference_logits(file, ids), ids, tolerance);
}

}  // namespace pagoda::model::model_compare
