// A one-layer random-weight model quantised to Q8_0 (made once per test binary), for tests that run
// `pagoda tune` in its quick mode on something it measures in seconds, those options, and a guard
// that drops the kernel plan tune installs.
#pragma once
#include <string>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"
#include "tune/tuner.h"

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

// `pagoda tune --quick` of that model on one thread (tests may narrow its methods).
inline TuneOptions quick_tiny_options() {
    TuneOptions o;
    o.model = tiny_q8_model();
    o.quick = true;
    o.max_threads = 1;
    return o;
}

struct PlanCleared {
    ~PlanCleared() { backend::cpu::clear_kernel_plan(); }
};

}  // namespace pagoda::tune::test
