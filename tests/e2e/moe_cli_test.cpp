// Mixture-of-experts models through the binary: gen-model's expert flags and their errors, `run` on
// each MoE architecture (gpt-oss, deepseek2 and glm4moe on both backends; the dense glm4 and smollm3 too), and `bench` counting only the used experts in the bytes a decode step reads.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

uint64_t decode_bytes(const std::string& model) {
    auto r = run_pagoda({"bench", "-m", model, "-p", "4", "-n", "4", "-r", "1", "--json", "--no-limits"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
        auto j = nlohmann::json::parse(line);
        if (j.at("test") == "tg4") return j.at("weight_bytes_per_token").get<uint64_t>();
    }
    ADD_FAILURE() << "no tg4 line in " << r.out;
    return 0;
}

TEST(MoeCommands, GenModelRunAndBench) {
    for (const std::string arch : {"llama", "qwen2moe", "qwen3moe"}) {
        const std::string path = temp_path("cli-moe-" + arch + ".gguf");
        auto g = run_pagoda({"gen-model", "-o", path, "--arch", arch, "--experts", "8", "--experts-used", "2",
                             "--expert-ffn-dim", "64"});
        ASSERT_EQ(g.exit_code, 0) << g.err;
        EXPECT_NE(g.err.find(arch + ", 8 experts, top 2"), std::string::npos) << g.err;
        auto r = run_pagoda({"run", "-m", path, "-p", "once upon", "-n", "6", "--temp", "0", "--ids"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_FALSE(r.out.empty());
    }
    // 2 of 8 experts of FFN 64 read what a dense FFN of 128 reads: the MoE's decode step reads the
    // dense one's bytes plus its F32 routers (2 layers x 8 x 64 floats), though its file is larger.
    const std::string moe = temp_path("cli-moe-llama.gguf"), dense = temp_path("cli-moe-dense.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "-o", dense, "--ffn", "128"}).exit_code, 0);
    EXPECT_EQ(decode_bytes(moe), decode_bytes(dense) + 2 * 8 * 64 * 4);
}

// gpt-oss through the binary: gen-model (F32 and with MXFP4 experts), then `run` greedy on the cpu
// and the reference backend (the same tokens at F32); --type mxfp4 is gpt-oss's only.
TEST(MoeCommands, GptOssGenModelAndRunOnBothBackends) {
    for (const std::string type : {"f32", "mxfp4"}) {
        const std::string path = temp_path("cli-gpt-oss-" + type + ".gguf");
        auto g = run_pagoda({"gen-model", "-o", path, "--arch", "gpt-oss", "--experts", "4", "--experts-used", "2",
                             "--head-dim", "16", "--ffn", "64", "--sliding-window", "4", "--type", type});
        ASSERT_EQ(g.exit_code, 0) << g.err;
        EXPECT_NE(g.err.find("gpt-oss, 4 experts, top 2"), std::string::npos) << g.err;
        std::string ids[2];
        for (int b = 0; b < 2; ++b) {
            auto r = run_pagoda({"run", "-m", path, "-p", "once upon a time there", "-n", "12", "--temp", "0", "--ids",
                                 "--backend", b == 0 ? "cpu" : "reference"});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            ids[b] = r.out;
        }
        EXPECT_FALSE(ids[0].empty());
        // F32: both compute in f32 or better, so greedy picks agree; MXFP4: the cpu's int8 activations
        // may flip a near tie (gpt_oss_model_test bounds the logits instead).
        if (type == "f32") { EXPECT_EQ(ids[0], ids[1]); }
    }
    auto r = run_pagoda({"gen-model", "-o", temp_path("cli-mxfp4-llama.gguf"), "--type", "mxfp4"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("(gpt-oss) mxfp4"), std::string::npos) << r.err;
}

// deepseek2 through the binary: gen-model in V3's form (q bottleneck, sigmoid groups, YaRN) and V2-Lite's
// (plain attn_q), then `run` greedy on the cpu and the reference backend (the same tokens at F32); the
// MLA flags are refused for another architecture.
TEST(MoeCommands, Deepseek2GenModelAndRunOnBothBackends) {
    const std::vector<std::string> mla = {"--arch", "deepseek2", "--experts", "8", "--experts-used", "2", "--head-dim", "24",
                                          "--mla-rope-dims", "8", "--v-head-dim", "16", "--kv-lora-rank", "32",
                                          "--expert-ffn-dim", "32", "--layers", "3"};
    const std::vector<std::vector<std::string>> forms = {
        {"--q-lora-rank", "32", "--expert-gating", "sigmoid", "--expert-groups", "4", "--expert-groups-used", "2",
         "--expert-scale", "2.5", "--expert-norm", "--yarn"},
        {"--q-lora-rank", "0", "--shared-experts", "2", "--mla-split"}};
    for (size_t f = 0; f < forms.size(); ++f) {
        const std::string path = temp_path("cli-deepseek2-" + std::to_string(f) + ".gguf");
        std::vector<std::string> args = {"gen-model", "-o", path};
        args.insert(args.end(), mla.begin(), mla.end());
        args.insert(args.end(), forms[f].begin(), forms[f].end());
        auto g = run_pagoda(args);
        ASSERT_EQ(g.exit_code, 0) << g.err;
        EXPECT_NE(g.err.find("deepseek2, 8 experts, top 2"), std::string::npos) << g.err;
        std::string ids[2];
        for (int b = 0; b < 2; ++b) {
            auto r = run_pagoda({"run", "-m", path, "-p", "once upon a time there", "-n", "12", "--temp", "0", "--ids",
                                 "--backend", b == 0 ? "cpu" : "reference"});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_NE(r.err.find("MLA (q rank " + std::string(f == 0 ? "32" : "0")), std::string::npos) << r.err;
            ids[b] = r.out;
        }
        EXPECT_FALSE(ids[0].empty());
        EXPECT_EQ(ids[0], ids[1]);
    }
    auto r = run_pagoda({"gen-model", "-o", temp_path("cli-deepseek2-bad.gguf"), "--kv-lora-rank", "32"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("are for --arch deepseek2"), std::string::npos) << r.err;
}

// glm4moe (GLM-4.5's form: Q/K norms, a NextN block), glm4 and smollm3 through the binary: gen-model,
// then `run` greedy on the cpu and the reference backend (the same tokens at F32); the glm4moe flags
// are refused for another architecture and the MLA ones for glm4moe.
TEST(MoeCommands, GlmAndSmollm3GenModelAndRunOnBothBackends) {
    const std::vector<std::vector<std::string>> forms = {
        {"--arch", "glm4moe", "--experts", "8", "--experts-used", "2", "--expert-ffn-dim", "32", "--layers", "3",
         "--head-dim", "32", "--qk-norm", "--nextn-layers", "1", "--expert-norm", "--expert-scale", "2.5"},
        {"--arch", "glm4", "--head-dim", "32"},
        {"--arch", "smollm3", "--layers", "4"}};
    const std::vector<std::string> described = {"glm4moe, 8 experts, top 2", "glm4, 2 layers", "smollm3, 4 layers"};
    for (size_t f = 0; f < forms.size(); ++f) {
        const std::string path = temp_path("cli-glm-" + std::to_string(f) + ".gguf");
        std::vector<std::string> args = {"gen-model", "-o", path};
        args.insert(args.end(), forms[f].begin(), forms[f].end());
        auto g = run_pagoda(args);
        ASSERT_EQ(g.exit_code, 0) << g.err;
        EXPECT_NE(g.err.find(described[f]), std::string::npos) << g.err;
        std::string ids[2];
        for (int b = 0; b < 2; ++b) {
            auto r = run_pagoda({"run", "-m", path, "-p", "once upon a time there", "-n", "12", "--temp", "0", "--ids",
                                 "--backend", b == 0 ? "cpu" : "reference"});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            if (f == 0) {
                EXPECT_NE(r.err.find("1 trailing NextN (multi-token prediction) block(s) stored but not run"), std::string::npos)
                    << r.err;
            }
            ids[b] = r.out;
        }
        EXPECT_FALSE(ids[0].empty());
        EXPECT_EQ(ids[0], ids[1]);
    }
    auto r = run_pagoda({"gen-model", "-o", temp_path("cli-glm-bad.gguf"), "--qk-norm"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--qk-norm is for --arch glm4moe or jina-bert-v2"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", temp_path("cli-glm-bad.gguf"), "--arch", "glm4moe", "--experts", "4", "--yarn"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("are for --arch deepseek2 (glm4moe's router"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", temp_path("cli-glm-bad.gguf"), "--arch", "glm4moe"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("glm4moe needs experts (--experts N)"), std::string::npos) << r.err;
}

TEST(MoeCommands, GenModelRefusesInconsistentExpertFlags) {
    const std::string path = temp_path("cli-moe-bad.gguf");
    auto r = run_pagoda({"gen-model", "-o", path, "--experts-used", "2"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("need --experts"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", path, "--arch", "qwen3moe"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("qwen3moe needs experts (--experts N)"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", path, "--experts", "4", "--experts-used", "5"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("5 experts used of 4 is out of range"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", path, "--experts", "4", "--shared-expert-ffn-dim", "8"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--shared-expert-ffn-dim is for --arch qwen2moe, qwen35moe or qwen3next"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
