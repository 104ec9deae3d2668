// A one-layer random-weight model quantised to Q8_0 (made once per test binary), for tests that run
// `pagoda tune` in its quick mode on something it measures in seconds; and a guard that drops the
// kernel plan tune installs.
#pragma once
#include <string>

#include "backend/cpu/kernel_plan.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"

namespace pagoda::tune::test {

inline const std::string& tiny_q8_model() {
    static const std::string path = [] {
        model::RandomModelSpec spec;
        spec.n_layers = 1;
        spec.context_length = 256;
        const std::string f32 = pagoda::test::temp_path("tune-tiny.gguf"), q8 = pagoda::test::temp_path("tune-tiny-q8.gguf");
        model::write_random_model(spec, nullptr, f32);
        ThreadPool pool(1);
        quant::quantize_model({.input = f32, .output = q8, .target = "q8_0"}, pool);
        return q8;
    }();
    return path;
}

struct PlanCleared {
    ~PlanCleared() { kernels::clear_kernel_plan(); }
};

}  // namespace pagoda::tune::test
