// `pagoda tune` measures the AMX threshold where AMX runs — here on the emulated tiles (the test
// hook), the only AMX this host has — and writes it into the plan of each packed int8 type. The
// attention method is measured there too (the tiny model's attention is plain) and, where AMX is
// off, not measured, with the reason in the progress and the measurements and no plan field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul_test_util.h"
#include "tune/amx_threshold.h"
#include "tune/attention_choice.h"
#include "tune/tuner.h"
#include "tiny_q8_model.h"

namespace pagoda::tune {
namespace {

// A quick tune of the tiny Q8_0 model on one thread with int8_dot measured alone, so the AMX
// threshold is (tiles are timed only for types that end up on int8_dot, and on a loaded host
// dequant_fma could time faster on this tiny model).
TuneOptions quick_int8_options() {
    TuneOptions o = test::quick_tiny_options();
    o.methods = {backend::cpu::PathMethod::int8_dot};
    return o;
}

TEST(TuneAmx, TheThresholdIsMeasuredWhereAmxRuns) {
    if (!(best_supported_isa() == Isa::avx512 && cpu_features().avx512vnni)) GTEST_SKIP() << "no AVX-512 VNNI";
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method";
    backend::cpu::testing::AmxGuard amx;
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    set_isa(Isa::avx512);
    backend::cpu::set_quant_method(backend::cpu::QuantMethod::int8_dot);
    set_amx_enabled(true);
    backend::cpu::set_amx_emulation(true);
    const TuneOptions o = quick_int8_options();
    std::vector<std::string> progress;
    const Profile p = tune_model(o, [&](size_t, size_t, const std::string& what) { progress.push_back(what); });
    const backend::cpu::TypePlan* q8 = p.plan.find(gguf::GgmlType::Q8_0);
    ASSERT_NE(q8, nullptr);
    ASSERT_EQ(q8->method, backend::cpu::PathMethod::int8_dot);
    ASSERT_TRUE(q8->amx_min_tokens.has_value());
    const auto& m = p.measurements.at("amx").at("q8_0");
    ASSERT_EQ(m.at("timings").size(), 2u);  // --quick: 16 and 64 tokens
    EXPECT_EQ(m.at("amx_min_tokens"), *q8->amx_min_tokens);
    std::vector<AmxTiming> timings;
    for (const auto& t : m.at("timings"))
        timings.push_back({t.at("tokens"), t.at("vnni_seconds"), t.at("amx_seconds")});
    EXPECT_EQ(choose_amx_min_tokens(timings), *q8->amx_min_tokens);
    // Without the command's serving hook the chosen setting's worst step is timed (a one-layer model's
    // steps are far under 50 ms: the first check meets the target).
    const auto& rounds = p.measurements.at("scheduler_check").at("rounds");
    ASSERT_EQ(rounds.size(), 1u);
    EXPECT_EQ(rounds[0].at("how"), "timed: the worst step's 95th percentile");
    EXPECT_EQ(rounds[0].at("samples_s").size(), 8u);  // --quick
    EXPECT_EQ(rounds[0].at("max_seqs"), p.scheduler.max_seqs);
    EXPECT_NEAR(p.scheduler.modelled_p99_itl_ms, 1e3 * rounds[0].at("measured_s").get<double>(), 1e-9);
    for (const auto& t : p.plan.types) {
        if (t.type != gguf::GgmlType::Q8_0) {
            EXPECT_FALSE(t.amx_min_tokens.has_value()) << gguf::type_name(uint32_t(t.type));
        }
    }

    // The attention method: timed on the model's shapes (--quick: a prompt as long as the context,
    // decode of 1 and 16 sequences at its end) and the choice written, or its absence explained.
    if (std::getenv("PAGODA_ATTENTION")) return;  // pins the method: not measured
    const auto& att = p.measurements.at("attention");
    ASSERT_TRUE(att.contains("cases")) << att.dump();
    ASSERT_EQ(att.at("cases").size(), 3u) << att.dump();
    EXPECT_EQ(att.at("cases")[0].at("case"), "prefill 256 tokens");
    EXPECT_EQ(att.at("cases")[2].at("case"), "decode 16 sequences at 255");
    EXPECT_EQ(std::count_if(progress.begin(), progress.end(),
                            [](const std::string& s) { return s.rfind("attention, ", 0) == 0; }),
              3);
    if (att.contains("chosen")) {
        ASSERT_TRUE(p.plan.attention.has_value());
        EXPECT_EQ(att.at("chosen"), backend::cpu::attention_method_name(*p.plan.attention));
        // The choice again from what the profile recorded: each case's query-key pairs, the workload.
        std::vector<AttentionTiming> timings;
        for (const auto& c : att.at("cases")) {
            const double tokens = c.at("tokens"), seqs = c.at("sequences"), pos = c.at("position");
            const bool decode = tokens == 1;
            timings.push_back({c.at("case"), decode, decode ? seqs * (pos + 1) : tokens * (tokens + 1) / 2,
                               c.at("simd_seconds"), c.at("amx_bf16_seconds")});
        }
        const AttentionChoice again = choose_attention_method(timings, o.workload);
        EXPECT_EQ(again.method, *p.plan.attention);
        EXPECT_DOUBLE_EQ(att.at("modelled_request_seconds").at("simd").get<double>(), again.simd_seconds);
        EXPECT_DOUBLE_EQ(att.at("modelled_request_seconds").at("amx_bf16").get<double>(), again.amx_seconds);
        EXPECT_EQ(profile_to_json(p).at("attention"), att.at("chosen"));
    } else {
        EXPECT_FALSE(p.plan.attention.has_value());
        EXPECT_FALSE(profile_to_json(p).contains("attention"));
        EXPECT_FALSE(att.value("why", "").empty()) << att.dump();
    }
}

TEST(TuneAmx, TheAttentionMethodIsNotMeasuredWhereAmxIsOff) {
    backend::cpu::testing::AmxGuard amx;
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    set_amx_enabled(false);
    const TuneOptions o = quick_int8_options();
    std::vector<std::string> progress;
    const Profile p = tune_model(o, [&](size_t done, size_t total, const std::string& what) {
        EXPECT_LE(done, total) << what;
        progress.push_back(what);
    });
    EXPECT_FALSE(p.plan.attention.has_value());
    EXPECT_FALSE(profile_to_json(p).contains("attention"));
    const auto& att = p.measurements.at("attention");
    EXPECT_EQ(att.at("measured"), false);
    const std::string why = att.at("why");
    EXPECT_TRUE(why.find("disabled by PAGODA_AMX=0") != std::string::npos || why.find("the active ISA is") != std::string::npos ||
                why.find("PAGODA_ATTENTION") != std::string::npos)
        << why;
    EXPECT_NE(std::find(progress.begin(), progress.end(), "attention method: simd, not measured (" + why + ")"), progress.end());
}

}  // namespace
}  // namespace pagoda::tune
