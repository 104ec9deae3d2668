// Profiles: the JSON round trip, the machine check (a profile from another CPU is refused naming the
// field that differs), strict parsing (each malformed profile refused naming its key), and where
// commands find one (use_profile: explicit file, default location, "none").
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <algorithm>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "env_guard.h"
#include "fixtures.h"
#include "model/random_model.h"
#include "tune/profile.h"
#include "tune/profile_use.h"

namespace pagoda::tune {
namespace {

using gguf::GgmlType;
using nlohmann::json;

Profile sample() {
    Profile p;
    p.machine = current_machine();
    p.model_path = "/models/small-q4_0.gguf";
    p.model_identity = 0x0123456789abcdefULL;
    p.plan.types = {{GgmlType::Q4_0, backend::cpu::PathMethod::int8_dot, {{1, {512, 32, 64}}, {8, {256, 16, 64}}, {INT64_MAX, {1024, 64, 128}}}, 48, 24},
                    {GgmlType::F16, backend::cpu::PathMethod::f32_fma, {{INT64_MAX, {512, 32, 64}}}}};
    p.threads = 2;
    p.kv_block_size = 32;
    p.scheduler = {256, 16, 50, 41.5, 321.25, true};
    p.measurements = {{"decode_step_s", {{1, 0.004}, {16, 0.02}}}};
    return p;
}

std::string error_of(const std::string& text) {
    try {
        (void)parse_profile(text, "profile test.json");
    } catch (const Error& e) {
        return e.what();
    }
    return "(accepted)";
}

std::string mutated(const std::function<void(json&)>& f) {
    json j = profile_to_json(sample());
    f(j);
    return j.dump();
}

TEST(Profile, RoundTripsThroughJsonAndAFile) {
    const Profile p = sample();
    const std::string path = test::temp_path("profile-roundtrip.json");
    write_profile_file(p, path);
    const Profile q = read_profile_file(path);
    EXPECT_EQ(q.machine.cpu_model, p.machine.cpu_model);
    EXPECT_EQ(q.machine.isa_flags, p.machine.isa_flags);
    EXPECT_EQ(q.machine.cores, p.machine.cores);
    EXPECT_EQ(q.machine.family, p.machine.family);
    EXPECT_EQ(q.model_path, p.model_path);
    EXPECT_EQ(q.model_identity, p.model_identity);
    ASSERT_EQ(q.plan.types.size(), 2u);
    EXPECT_EQ(q.plan.types[0].type, GgmlType::Q4_0);
    EXPECT_EQ(q.plan.types[0].method, backend::cpu::PathMethod::int8_dot);
    ASSERT_EQ(q.plan.types[0].ranges.size(), 3u);
    EXPECT_EQ(q.plan.types[0].ranges[1].max_tokens, 8);
    EXPECT_EQ(q.plan.types[0].ranges[1].tiles.mc, 16);
    EXPECT_EQ(q.plan.types[0].ranges[2].max_tokens, INT64_MAX);
    EXPECT_EQ(q.plan.types[0].ranges[2].tiles.nc, 128);
    EXPECT_EQ(q.plan.types[0].amx_min_tokens, 48);
    EXPECT_FALSE(q.plan.types[1].amx_min_tokens.has_value()) << "absent stays absent (the default applies)";
    EXPECT_EQ(profile_to_json(p)["kernel_plan"][0]["amx_min_tokens"], 48);
    EXPECT_FALSE(profile_to_json(p)["kernel_plan"][1].contains("amx_min_tokens"));
    EXPECT_NE(describe_profile(q).find("[AMX tiles from 48 tokens]"), std::string::npos) << describe_profile(q);
    EXPECT_EQ(q.plan.types[0].wide_min_tokens, 24);
    EXPECT_FALSE(q.plan.types[1].wide_min_tokens.has_value());
    EXPECT_EQ(profile_to_json(p)["kernel_plan"][0]["wide_min_tokens"], 24);
    EXPECT_FALSE(profile_to_json(p)["kernel_plan"][1].contains("wide_min_tokens"));
    EXPECT_NE(describe_profile(q).find("[wide prefill kernel from 24 tokens]"), std::string::npos) << describe_profile(q);
    EXPECT_EQ(q.threads, 2);
    EXPECT_EQ(q.kv_block_size, 32);
    EXPECT_EQ(q.scheduler.max_batched_tokens, 256);
    EXPECT_EQ(q.scheduler.max_seqs, 16);
    EXPECT_DOUBLE_EQ(q.scheduler.modelled_p99_itl_ms, 41.5);
    EXPECT_EQ(q.measurements, p.measurements);
    EXPECT_EQ(profile_to_json(q), profile_to_json(p));
}

TEST(Profile, AnotherMachineIsRefusedNamingWhatDiffers) {
    const MachineIdentity here = current_machine();
    Profile p = sample();
    EXPECT_NO_THROW(require_same_machine(p, here, "--profile x"));
    p.machine.cpu_model = "AMD Ryzen 9 7950X 16-Core Processor";
    try {
        require_same_machine(p, here, "--profile x");
        FAIL() << "accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("cpu_model: 'AMD Ryzen 9 7950X 16-Core Processor' in the profile"), std::string::npos) << m;
        EXPECT_NE(m.find("another machine"), std::string::npos) << m;
    }
    p = sample();
    p.machine.isa_flags.push_back("amx_zz");
    std::sort(p.machine.isa_flags.begin(), p.machine.isa_flags.end());
    try {
        require_same_machine(p, here, "--profile x");
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("isa_flags: the profile's CPU has [amx_zz]"), std::string::npos) << e.what();
    }
    p = sample();
    p.machine.cores = here.cores + 6;
    EXPECT_EQ(differences(p.machine, here).size(), 1u);
    EXPECT_NE(differences(p.machine, here)[0].find("cores"), std::string::npos);
}

TEST(Profile, MalformedProfilesAreRefusedNamingTheKey) {
    EXPECT_NE(error_of("{\"format\": ").find("profile test.json: not valid JSON"), std::string::npos);
    EXPECT_NE(error_of("[1, 2]").find("must be an object"), std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["version"] = 2; })).find("key 'version' is 2"), std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["format"] = "other"; })).find("key 'format'"), std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["method"] = "amx_magic"; }))
                  .find("key 'kernel_plan[0].method' is 'amx_magic', not one of"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][1]["method"] = "int8_dot"; }))
                  .find("key 'kernel_plan[1].method': int8_dot cannot multiply f16 weights"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["ranges"][0]["kc"] = -256; }))
                  .find("key 'kernel_plan[0].ranges[0].kc' is -256: use 1 to"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["ranges"][1]["max_tokens"] = 1; }))
                  .find("key 'kernel_plan[0].ranges[1].max_tokens' is 1: the ranges' max_tokens must increase"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["ranges"][2]["max_tokens"] = 99; }))
                  .find("'kernel_plan[0].ranges[2].max_tokens' must be absent"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["type"] = "q9_9"; })).find("key 'kernel_plan[0].type' is 'q9_9'"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["amx_min_tokens"] = 0; }))
                  .find("key 'kernel_plan[0].amx_min_tokens' is 0: use 1 to"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["amx_min_tokens"] = "32"; }))
                  .find("key 'kernel_plan[0].amx_min_tokens' must be an integer"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["wide_min_tokens"] = 16; }))
                  .find("key 'kernel_plan[0].wide_min_tokens' is 16"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][1]["wide_min_tokens"] = 32; }))
                  .find("key 'kernel_plan[1].wide_min_tokens': the wide prefill kernel runs only int8_dot on q4_0"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][1]["amx_min_tokens"] = 32; }))
                  .find("key 'kernel_plan[1].amx_min_tokens': AMX tiles run only int8_dot on q4_0"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["method"] = "dequant_fma"; }))
                  .find("(not q4_0 dequant_fma)"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["method"] = "amx_bf16"; }))
                  .find("amx_bf16 cannot multiply q4_0 weights"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["threads"] = "two"; })).find("key 'threads' must be an integer"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["threads"] = 0; })).find("key 'threads' is 0"), std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kv_block_size"] = 24; })).find("key 'kv_block_size' is 24: use a power of two"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["scheduler"].erase("max_seqs"); })).find("key 'scheduler.max_seqs' is missing"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["scheduler"]["max_sequences"] = 4; }))
                  .find("key 'scheduler.max_sequences' is not a profile key"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["model"]["identity"] = "xyz"; })).find("key 'model.identity'"), std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["machine"]["isa_flags"][0] = 3; })).find("key 'machine.isa_flags[0]'"),
              std::string::npos);
}

// The attention method: optional beside kernel_plan; written only where tune chose one, read back
// as written, absent meaning not chosen (simd), and an unknown name refused naming the key.
TEST(Profile, TheAttentionMethodIsOptional) {
    Profile p = sample();
    EXPECT_FALSE(profile_to_json(p).contains("attention")) << "not chosen: not written";
    const Profile absent = parse_profile(profile_to_json(p).dump());
    EXPECT_FALSE(absent.plan.attention.has_value());
    EXPECT_NE(describe_profile(absent).find("attention simd (not measured)"), std::string::npos) << describe_profile(absent);

    for (auto m : backend::cpu::kAttentionMethods) {
        p.plan.attention = m;
        const json j = profile_to_json(p);
        EXPECT_EQ(j.at("attention"), backend::cpu::attention_method_name(m));
        const Profile q = parse_profile(j.dump());
        ASSERT_TRUE(q.plan.attention.has_value());
        EXPECT_EQ(*q.plan.attention, m);
        EXPECT_EQ(profile_to_json(q), j);
        EXPECT_NE(describe_profile(q).find(std::string("attention ") + backend::cpu::attention_method_name(m) + "\n"),
                  std::string::npos)
            << describe_profile(q);
    }

    const std::string bad = error_of(mutated([](json& j) { j["attention"] = "flash"; }));
    EXPECT_NE(bad.find("key 'attention' is 'flash', not one of simd, amx_bf16"), std::string::npos) << bad;
    EXPECT_NE(error_of(mutated([](json& j) { j["attention"] = 1; })).find("key 'attention' must be a string"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["kernel_plan"][0]["attention"] = "simd"; }))
                  .find("key 'kernel_plan[0].attention' is not a profile key"),
              std::string::npos)
        << "the method is the plan's, not a weight type's";
}

// The decode KV prefetch: optional beside kernel_plan like the attention method; written only where
// tune measured it, read back as written (on or off), absent meaning not measured (off).
TEST(Profile, TheDecodeKvPrefetchIsOptional) {
    Profile p = sample();
    EXPECT_FALSE(profile_to_json(p).contains("decode_kv_prefetch")) << "not measured: not written";
    const Profile absent = parse_profile(profile_to_json(p).dump());
    EXPECT_FALSE(absent.plan.decode_kv_prefetch.has_value());
    EXPECT_NE(describe_profile(absent).find("decode KV prefetch off (not measured)"), std::string::npos)
        << describe_profile(absent);
    for (bool on : {false, true}) {
        p.plan.decode_kv_prefetch = on;
        const json j = profile_to_json(p);
        EXPECT_EQ(j.at("decode_kv_prefetch"), on);
        const Profile q = parse_profile(j.dump());
        ASSERT_TRUE(q.plan.decode_kv_prefetch.has_value());
        EXPECT_EQ(*q.plan.decode_kv_prefetch, on);
        EXPECT_EQ(profile_to_json(q), j);
        EXPECT_NE(describe_profile(q).find(std::string("decode KV prefetch ") + (on ? "on" : "off") + "\n"), std::string::npos)
            << describe_profile(q);
    }
    EXPECT_NE(error_of(mutated([](json& j) { j["decode_kv_prefetch"] = "yes"; }))
                  .find("key 'decode_kv_prefetch' must be a boolean"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["decode_kv_prefetch"] = 1; })).find("key 'decode_kv_prefetch' must be a boolean"),
              std::string::npos);
}


// The decode weight prefetch: optional like the KV prefetch; written only where tune measured it,
// read back as written (l1 or l2), absent meaning not measured (l2); another name is refused.
TEST(Profile, TheWeightPrefetchIsOptional) {
    Profile p = sample();
    EXPECT_FALSE(profile_to_json(p).contains("weight_prefetch")) << "not measured: not written";
    const Profile absent = parse_profile(profile_to_json(p).dump());
    EXPECT_FALSE(absent.plan.weight_prefetch.has_value());
    EXPECT_NE(describe_profile(absent).find("decode weight prefetch l2 (not measured)"), std::string::npos)
        << describe_profile(absent);
    for (auto level : {backend::cpu::WeightPrefetch::l1, backend::cpu::WeightPrefetch::l2}) {
        const std::string name = backend::cpu::weight_prefetch_name(level);
        p.plan.weight_prefetch = level;
        const json j = profile_to_json(p);
        EXPECT_EQ(j.at("weight_prefetch"), name);
        const Profile q = parse_profile(j.dump());
        ASSERT_TRUE(q.plan.weight_prefetch.has_value());
        EXPECT_EQ(*q.plan.weight_prefetch, level);
        EXPECT_EQ(profile_to_json(q), j);
        EXPECT_NE(describe_profile(q).find("decode weight prefetch " + name + "\n"), std::string::npos) << describe_profile(q);
    }
    EXPECT_NE(error_of(mutated([](json& j) { j["weight_prefetch"] = "l3"; }))
                  .find("key 'weight_prefetch' is 'l3', not one of l1, l2"),
              std::string::npos);
    EXPECT_NE(error_of(mutated([](json& j) { j["weight_prefetch"] = true; })).find("weight_prefetch"), std::string::npos);
}

TEST(ProfileUse, ExplicitDefaultLocationAndNone) {
    struct Clear {
        ~Clear() { backend::cpu::clear_kernel_plan(); }
    } clear;
    const std::string dir = test::temp_path("profile-xdg");
    std::filesystem::create_directories(dir + "/pagoda");
    pagoda::test::EnvGuard xdg("XDG_CONFIG_HOME", dir);
    EXPECT_EQ(default_profile_path(), dir + "/pagoda/profile.json");
    EXPECT_FALSE(use_profile("", ""));  // nothing at the default location
    EXPECT_FALSE(backend::cpu::has_kernel_plan());

    Profile p = sample();
    write_profile_file(p, dir + "/pagoda/profile.json");
    auto s = use_profile("", "");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->max_batched_tokens, 256);
    EXPECT_EQ(s->max_seqs, 16);
    EXPECT_EQ(s->kv_block_size, 32);
    EXPECT_TRUE(backend::cpu::has_kernel_plan());
    EXPECT_EQ(backend::cpu::kernel_choice(GgmlType::Q4_0, 4).tiles.mc, 16);
    backend::cpu::clear_kernel_plan();
    EXPECT_FALSE(use_profile("none", ""));
    EXPECT_FALSE(backend::cpu::has_kernel_plan());

    // From another machine: skipped at the default location, refused when named.
    p.machine.model += 1;
    write_profile_file(p, dir + "/pagoda/profile.json");
    EXPECT_FALSE(use_profile("", ""));
    EXPECT_FALSE(backend::cpu::has_kernel_plan());
    try {
        (void)use_profile(dir + "/pagoda/profile.json", "");
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("model: '"), std::string::npos) << e.what();
    }
    try {
        (void)use_profile(dir + "/missing.json", "");
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::tune
