// Hugging Face folders through the binary: gen-model --format hf (single file and sharded),
// gguf-info, bench and quantize on a folder (the same tensor tables as the GGUF), --quantize at load giving
// `run` the same tokens as a file quantised by `pagoda quantize`, `run` on the folder's tokenizer.json
// printing the GGUF's text, and a folder without a tokenizer refused by `run` naming tokenizer.json.
// Encoder folders (bert as XLM-R cross-encoder) and the encoder forms gen-model refuses.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

namespace fs = std::filesystem;

// The tensor lines of gguf-info (name, type, shape, bytes), without offsets.
std::vector<std::string> tensor_table(const std::string& out) {
    std::vector<std::string> rows;
    std::istringstream in(out.substr(out.find("\ntensors:")));
    std::string line;
    std::getline(in, line);
    std::getline(in, line);
    std::getline(in, line);  // header
    while (std::getline(in, line) && !line.empty()) {
        std::istringstream f(line);
        std::string name, type, shape, word, offset, bytes;
        f >> name >> type;
        std::getline(f, shape, ']');
        f >> offset >> bytes;
        rows.push_back(name + " " + type + shape + "] " + bytes);
    }
    std::sort(rows.begin(), rows.end());
    return rows;
}

TEST(HfCli, GenModelFolderLoadsEverywhereAGgufDoes) {
    const std::string gguf = temp_path("hfcli.gguf"), dir = temp_path("hfcli-dir"), sharded = temp_path("hfcli-sharded");
    fs::remove_all(dir);
    fs::remove_all(sharded);
    const std::vector<std::string> shape = {"--arch", "qwen3", "--layers", "2", "--dim", "64", "--seed", "5"};
    auto with = [&](std::vector<std::string> a) {
        a.insert(a.end(), shape.begin(), shape.end());
        return a;
    };
    ASSERT_EQ(run_pagoda(with({"gen-model", "-o", gguf})).exit_code, 0);
    auto g = run_pagoda(with({"gen-model", "-o", dir, "--format", "hf"}));
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "config.json") && fs::exists(fs::path(dir) / "model.safetensors"));
    ASSERT_EQ(run_pagoda(with({"gen-model", "-o", sharded, "--format", "hf", "--shards", "3"})).exit_code, 0);
    EXPECT_TRUE(fs::exists(fs::path(sharded) / "model.safetensors.index.json"));
    EXPECT_TRUE(fs::exists(fs::path(sharded) / "model-00003-of-00003.safetensors"));

    auto info_gguf = run_pagoda({"gguf-info", gguf});
    auto info_dir = run_pagoda({"gguf-info", dir});
    auto info_sharded = run_pagoda({"gguf-info", sharded});
    ASSERT_EQ(info_dir.exit_code, 0) << info_dir.err;
    EXPECT_NE(info_dir.out.find("Hugging Face model"), std::string::npos);
    EXPECT_EQ(tensor_table(info_dir.out), tensor_table(info_gguf.out));
    EXPECT_EQ(tensor_table(info_sharded.out), tensor_table(info_gguf.out));
    EXPECT_FALSE(tensor_table(info_gguf.out).empty());

    for (const std::string& m : {dir, sharded}) {
        auto b = run_pagoda({"bench", "-m", m, "-p", "4", "-n", "2", "-r", "1", "--no-limits"});
        EXPECT_EQ(b.exit_code, 0) << b.err;
    }
    auto b8 = run_pagoda({"bench", "-m", dir, "-p", "4", "-n", "2", "-r", "1", "--no-limits", "--quantize", "Q8_0", "--json"});
    EXPECT_EQ(b8.exit_code, 0) << b8.err;
    EXPECT_NE(b8.out.find("q8_0"), std::string::npos) << b8.out;

    // quantize reads a folder too (a conversion): the same tensors as quantising the GGUF.
    const std::string q_dir = temp_path("hfcli-dir-q8.gguf"), q_gguf = temp_path("hfcli-gguf-q8.gguf");
    auto qd = run_pagoda({"quantize", dir, q_dir, "q8_0"});
    ASSERT_EQ(qd.exit_code, 0) << qd.err;
    ASSERT_EQ(run_pagoda({"quantize", gguf, q_gguf, "q8_0"}).exit_code, 0);
    EXPECT_EQ(tensor_table(run_pagoda({"gguf-info", q_dir}).out), tensor_table(run_pagoda({"gguf-info", q_gguf}).out));

    // The folder's tokenizer.json serves run as the GGUF's vocabulary does: the same text.
    const std::vector<std::string> greedy = {"-p", "hello world", "-n", "12", "--temp", "0", "-t", "1"};
    auto run_on = [&](const std::string& m) {
        std::vector<std::string> a = {"run", "-m", m};
        a.insert(a.end(), greedy.begin(), greedy.end());
        return run_pagoda(a);
    };
    auto r_gguf = run_on(gguf), r_dir = run_on(dir);
    ASSERT_EQ(r_dir.exit_code, 0) << r_dir.err;
    EXPECT_EQ(r_dir.out, r_gguf.out);
    EXPECT_FALSE(r_gguf.out.empty());
    // tune measures a folder as it does a GGUF (its -m check once took only regular files).
    const std::string profile = temp_path("hfcli-profile.json");
    auto t = run_pagoda({"tune", "-m", dir, "--quick", "-o", profile, "-t", "1"});
    EXPECT_EQ(t.exit_code, 0) << t.err;
    EXPECT_TRUE(fs::exists(profile));

    fs::remove(fs::path(dir) / "tokenizer.json");
    auto r = run_on(dir);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
    auto bad = run_pagoda({"gen-model", "-o", gguf, "--shards", "2"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--shards is for --format hf"), std::string::npos) << bad.err;
}

TEST(HfCli, QuantizeAtLoadRunsAsAQuantizedFile) {
    const std::string src = temp_path("hfcli-q.gguf"), q = temp_path("hfcli-q-q4_0.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "-o", src, "--seed", "9"}).exit_code, 0);
    ASSERT_EQ(run_pagoda({"quantize", src, q, "q4_0"}).exit_code, 0);
    auto a = run_pagoda({"run", "-m", q, "-p", "once upon", "-n", "8", "--temp", "0", "--ids"});
    auto b = run_pagoda({"run", "-m", src, "--quantize", "q4_0", "-p", "once upon", "-n", "8", "--temp", "0", "--ids"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());
    auto twice = run_pagoda({"run", "-m", q, "--quantize", "q8_0", "-p", "x", "-n", "1"});
    EXPECT_NE(twice.exit_code, 0);
    EXPECT_NE(twice.err.find("already quantised"), std::string::npos) << twice.err;
    auto unknown = run_pagoda({"run", "-m", src, "--quantize", "q9_9", "-p", "x", "-n", "1"});
    EXPECT_NE(unknown.exit_code, 0);
    EXPECT_NE(unknown.err.find("unknown quantisation type 'q9_9'"), std::string::npos) << unknown.err;
}

// Encoders through gen-model: the XLM-R cross-encoder folder shows the GGUF's tensor table (its
// position table cut by the offset), so does nomic-bert's NomicBertModel folder, and a class that
// does not fit is refused by name.
TEST(HfCli, GenModelWritesEncoderFolders) {
    const std::string gguf = temp_path("cli-hf-xlmr.gguf"), dir = temp_path("cli-hf-xlmr");
    fs::remove_all(dir);
    const std::vector<std::string> shape = {"--arch", "bert", "--encoder-vocab", "unigram", "--rank-head", "dense", "--seed", "4"};
    auto with = [&](std::vector<std::string> args) {
        args.insert(args.end(), shape.begin(), shape.end());
        return args;
    };
    ASSERT_EQ(run_pagoda(with({"gen-model", "-o", gguf})).exit_code, 0);
    auto g = run_pagoda(with({"gen-model", "-o", dir, "--format", "hf"}));
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "tokenizer.json"));
    std::ifstream config(fs::path(dir) / "config.json");
    EXPECT_EQ(nlohmann::json::parse(config)["architectures"][0], "XLMRobertaForSequenceClassification");
    auto info_g = run_pagoda({"gguf-info", gguf}), info_h = run_pagoda({"gguf-info", dir});
    ASSERT_EQ(info_h.exit_code, 0) << info_h.err;
    EXPECT_EQ(tensor_table(info_h.out), tensor_table(info_g.out));

    // nomic-bert: a NomicBertModel folder with the GGUF's tensor table; no other class for it.
    const std::string nomic_gguf = temp_path("cli-hf-nomic.gguf"), nomic_dir = temp_path("cli-hf-nomic");
    fs::remove_all(nomic_dir);
    ASSERT_EQ(run_pagoda({"gen-model", "-o", nomic_gguf, "--arch", "nomic-bert"}).exit_code, 0);
    auto nomic = run_pagoda({"gen-model", "-o", nomic_dir, "--arch", "nomic-bert", "--format", "hf"});
    ASSERT_EQ(nomic.exit_code, 0) << nomic.err;
    std::ifstream nomic_config(fs::path(nomic_dir) / "config.json");
    EXPECT_EQ(nlohmann::json::parse(nomic_config)["architectures"][0], "NomicBertModel");
    auto nomic_h = run_pagoda({"gguf-info", nomic_dir});
    ASSERT_EQ(nomic_h.exit_code, 0) << nomic_h.err;
    EXPECT_EQ(tensor_table(nomic_h.out), tensor_table(run_pagoda({"gguf-info", nomic_gguf}).out));
    auto nomic_class = run_pagoda({"gen-model", "-o", temp_path("cli-hf-nomic-class"), "--arch", "nomic-bert", "--format", "hf",
                                   "--hf-class", "BertModel"});
    EXPECT_NE(nomic_class.exit_code, 0);
    EXPECT_NE(nomic_class.err.find("--hf-class is for --arch bert"), std::string::npos) << nomic_class.err;
    auto no_format = run_pagoda({"gen-model", "-o", temp_path("cli-hf-class.gguf"), "--arch", "bert", "--hf-class", "BertModel"});
    EXPECT_NE(no_format.err.find("--hf-class is for --format hf"), std::string::npos) << no_format.err;
    auto mismatch = run_pagoda({"gen-model", "-o", temp_path("cli-hf-mismatch"), "--arch", "bert", "--format", "hf", "--hf-class",
                                "XLMRobertaModel", "--rank-head", "dense"});
    EXPECT_NE(mismatch.exit_code, 0);
    EXPECT_NE(mismatch.err.find("is not a classifier"), std::string::npos) << mismatch.err;
}

}  // namespace
}  // namespace pagoda::test
