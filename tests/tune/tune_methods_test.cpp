// TuneOptions::methods: `pagoda tune` measures, per weight type, only the listed methods that apply
// to it and run here, and every applicable one where the list names none of them.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cpu/kernel_plan.h"
#include "backend/cpu/matmul_test_util.h"
#include "fixtures.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"
#include "tune/tuner.h"

namespace pagoda::tune {
namespace {

const std::string& q8_model() {
    static const std::string path = [] {
        model::RandomModelSpec spec;
        spec.n_layers = 1;
        spec.context_length = 256;
        const std::string f32 = test::temp_path("tune-methods.gguf"), q8 = test::temp_path("tune-methods-q8.gguf");
        model::write_random_model(spec, nullptr, f32);
        ThreadPool pool(1);
        quant::quantize_model({.input = f32, .output = q8, .target = "q8_0"}, pool);
        return q8;
    }();
    return path;
}

Profile tune_with(std::vector<kernels::PathMethod> methods) {
    TuneOptions o;
    o.model = q8_model();
    o.quick = true;
    o.max_threads = 1;
    o.methods = std::move(methods);
    return tune_model(o, [](size_t, size_t, const std::string&) {});
}

TEST(TuneMethods, OnlyTheListedMethodsOfATypeAreMeasured) {
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method";
    kernels::testing::KernelConfigGuard config;
    struct ClearPlan {
        ~ClearPlan() { kernels::clear_kernel_plan(); }
    } clear;
    const Profile p = tune_with({kernels::PathMethod::dequant_fma});
    const kernels::TypePlan* q8 = p.plan.find(gguf::GgmlType::Q8_0);
    ASSERT_NE(q8, nullptr);
    EXPECT_EQ(q8->method, kernels::PathMethod::dequant_fma);
    const auto& methods = p.measurements.at("matmul").at("q8_0").at("methods");
    ASSERT_EQ(methods.size(), 1u);
    EXPECT_TRUE(methods.contains("dequant_fma"));
}

TEST(TuneMethods, AListNamingNoneOfATypesMethodsMeasuresThemAll) {
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method";
    kernels::testing::KernelConfigGuard config;
    struct ClearPlan {
        ~ClearPlan() { kernels::clear_kernel_plan(); }
    } clear;
    const Profile p = tune_with({kernels::PathMethod::f32_fma});  // a float method: no quantised type takes it
    const auto& methods = p.measurements.at("matmul").at("q8_0").at("methods");
    EXPECT_TRUE(methods.contains("int8_dot"));
    EXPECT_TRUE(methods.contains("dequant_fma"));
}

}  // namespace
}  // namespace pagoda::tune
