// TuneOptions::methods: `pagoda tune` measures, per weight type, only the listed methods that apply
// to it and run here, and every applicable one where the list names none of them.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cpu/matmul_test_util.h"
#include "tiny_q8_model.h"
#include "tune/tuner.h"

namespace pagoda::tune {
namespace {

class TuneMethods : public ::testing::Test {
protected:
    void SetUp() override {
        if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method";
    }
    // The methods tune measured for the model's Q8_0 matrices, given this list.
    static nlohmann::json q8_methods_measured(std::vector<backend::cpu::PathMethod> methods, backend::cpu::PathMethod* chosen) {
        TuneOptions o = test::quick_tiny_options();
        o.methods = std::move(methods);
        const Profile p = tune_model(o, [](size_t, size_t, const std::string&) {});
        const backend::cpu::TypePlan* q8 = p.plan.find(gguf::GgmlType::Q8_0);
        if (q8 && chosen) *chosen = q8->method;
        return p.measurements.at("matmul").at("q8_0").at("methods");
    }
    backend::cpu::testing::KernelConfigGuard config_;
    test::PlanCleared clear_;
};

TEST_F(TuneMethods, OnlyTheListedMethodsOfATypeAreMeasured) {
    backend::cpu::PathMethod chosen = backend::cpu::PathMethod::int8_dot;
    const auto methods = q8_methods_measured({backend::cpu::PathMethod::dequant_fma}, &chosen);
    EXPECT_EQ(chosen, backend::cpu::PathMethod::dequant_fma);
    ASSERT_EQ(methods.size(), 1u);
    EXPECT_TRUE(methods.contains("dequant_fma"));
}

TEST_F(TuneMethods, AListNamingNoneOfATypesMethodsMeasuresThemAll) {
    const auto methods = q8_methods_measured({backend::cpu::PathMethod::f32_fma}, nullptr);  // a float method only
    EXPECT_TRUE(methods.contains("int8_dot"));
    EXPECT_TRUE(methods.contains("dequant_fma"));
}

}  // namespace
}  // namespace pagoda::tune
