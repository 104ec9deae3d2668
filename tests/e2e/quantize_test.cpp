// `pagoda quantize` end to end: standard GGUF output with the expected types, quantised models that
// run and stay close to their base (KL divergence), and calibration that lowers the INT4 error.
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"

namespace pagoda::test {
namespace {

double field_after(const std::string& text, const std::string& label) {
    auto pos = text.find(label);
    if (pos == std::string::npos) return -1;
    return std::stod(text.substr(pos + label.size()));
}

// Mean KL(base || quantised) on the evaluation text.
double kl_against(const std::string& model, const std::string& base) {
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto r = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "128", "--kl-base", base});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return field_after(r.out, "mean KL divergence (base || model): ");
}

TEST(Quantize, WritesStandardTypesByRule) {
    const std::string base = temp_path("q-base.gguf"), out = temp_path("q-out.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "--type", "f16", "-o", base}).exit_code, 0);
    std::map<std::string, std::map<std::string, std::string>> expected = {
        {"q8_0", {{"blk.0.attn_q.weight", "q8_0"}, {"output.weight", "q8_0"}}},
        {"q4_0", {{"blk.0.attn_q.weight", "q4_0"}, {"output.weight", "q6_K"}}},
        {"q4_k", {{"blk.0.attn_q.weight", "q4_K"}, {"output.weight", "q6_K"}}},
        {"q5_0", {{"blk.0.attn_q.weight", "q5_0"}, {"output.weight", "q6_K"}}},
        {"q5_1", {{"blk.1.ffn_down.weight", "q5_1"}}},
        {"q2_k", {{"blk.0.attn_q.weight", "q2_K"}, {"output.weight", "q6_K"}}},
        {"q3_k", {{"blk.1.ffn_up.weight", "q3_K"}}},
        {"q4_k_m", {{"blk.1.attn_v.weight", "q6_K"}, {"blk.0.attn_v.weight", "q4_K"}, {"blk.0.attn_q.weight", "q4_K"}}},
        {"int8", {{"blk.1.ffn_down.weight", "q8_0"}}},
        {"int4-g128", {{"blk.1.ffn_up.weight", "q4_1"}}},
        {"iq4_nl", {{"blk.0.attn_q.weight", "iq4_nl"}, {"output.weight", "q6_K"}}},
        {"IQ4_XS", {{"blk.1.ffn_down.weight", "iq4_xs"}, {"output.weight", "q6_K"}}},
        {"MXFP4_MOE", {{"blk.0.attn_k.weight", "mxfp4"}}},
    };
    for (const auto& [type, tensors] : expected) {
        auto r = run_pagoda({"quantize", base, out, type});
        ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
        auto file = gguf::File::open(out);
        for (const auto& [name, want] : tensors) {
            const auto* t = file->find_tensor(name);
            ASSERT_NE(t, nullptr) << name;
            EXPECT_EQ(gguf::type_name(uint32_t(t->type)), want) << type << " " << name;
        }
        EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("token_embd.weight")->type)), "f16") << type;
        EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("blk.0.attn_norm.weight")->type)), "f32") << type;
        auto run = run_pagoda({"run", "-m", out, "-p", "abc", "-n", "8", "--temp", "0", "--ids"});
        EXPECT_EQ(run.exit_code, 0) << type << ": " << run.err;
    }
}

// llama-quantize's own layout (embedding quantised to the base type, output head Q6_K): the files
// people download. They load, run, and stay close to their base; the flags reach the right tensors.
TEST(Quantize, LlamaQuantizeLayoutLoadsAndStaysClose) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    const std::string q4 = temp_path("s-q4-embd.gguf"), q8 = temp_path("s-q8-embd.gguf");
    auto r = run_pagoda({"quantize", base, q4, "q4_0", "--token-embedding-type", "q4_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--token-embedding-type"), std::string::npos) << r.out;
    ASSERT_EQ(run_pagoda({"quantize", base, q8, "q8_0", "--token-embedding-type", "q8_0"}).exit_code, 0);
    EXPECT_EQ(gguf::type_name(uint32_t(gguf::File::open(q4)->find_tensor("token_embd.weight")->type)), "q4_0");
    EXPECT_EQ(gguf::type_name(uint32_t(gguf::File::open(q8)->find_tensor("token_embd.weight")->type)), "q8_0");
    const double kl8 = kl_against(q8, base), kl4 = kl_against(q4, base);
    EXPECT_GE(kl8, 0.0);
    EXPECT_LT(kl8, 0.01);
    EXPECT_GT(kl4, kl8);
    EXPECT_LT(kl4, 0.25);

    const std::string f16 = temp_path("q-embd-base.gguf"), km = temp_path("q-embd-km.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "--type", "f16", "-o", f16}).exit_code, 0);
    r = run_pagoda({"quantize", f16, km, "q4_k_m", "--token-embedding-type", "q4_k", "--output-tensor-type", "q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto file = gguf::File::open(km);
    EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("token_embd.weight")->type)), "q4_K");
    EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("output.weight")->type)), "q8_0");
    auto run = run_pagoda({"run", "-m", km, "-p", "abc", "-n", "8", "--temp", "0", "--ids"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run_pagoda({"quantize", f16, km, "q4_0", "--token-embedding-type", "q1_k"}).exit_code, 0);
}

// Tensor name -> type name, read from `pagoda gguf-info`'s tensor table.
std::map<std::string, std::string> tensor_types(const std::string& path) {
    auto r = run_pagoda({"gguf-info", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::string> types;
    std::istringstream in(r.out.substr(r.out.find("\ntensors:")));
    std::string line;
    std::getline(in, line);  // blank
    std::getline(in, line);  // "tensors: N"
    std::getline(in, line);  // column titles
    while (std::getline(in, line) && !line.empty()) {  // the table ends at a blank line
        std::istringstream fields(line);
        std::string name, type;
        if (fields >> name >> type) types[name] = type;
    }
    return types;
}

// What llama-quantize's published rules give each tensor of a dense 16-layer model, written out per
// layer (use_more_bits for 16 layers: 0, 1, 4, 7, 10, 13, 14, 15).
std::string expected_mix_type(const std::string& mix, const std::string& name) {
    if (name == "token_embd.weight") return "f16";  // pagoda keeps it (see quantize --help)
    if (name == "output.weight") return "q6_K";
    if (name.find("norm") != std::string::npos) return "f32";
    const int layer = std::stoi(name.substr(4));
    const std::string role = name.substr(name.find('.', 4) + 1);
    const bool more_bits = layer == 0 || layer == 1 || layer == 4 || layer == 7 || layer == 10 || layer >= 13;
    if (mix == "q5_k_s") return "q5_K";
    if (mix == "q5_k_m") return (role == "attn_v.weight" || role == "ffn_down.weight") && more_bits ? "q6_K" : "q5_K";
    if (mix == "q4_k_m") return (role == "attn_v.weight" || role == "ffn_down.weight") && more_bits ? "q6_K" : "q4_K";
    // q3_k_m
    if (role == "attn_v.weight") return layer < 2 ? "q5_K" : "q4_K";
    if (role == "ffn_down.weight") return layer < 1 ? "q5_K" : "q4_K";  // the first 16th of 16 layers
    if (role == "attn_output.weight") return "q4_K";
    return "q3_K";
}

TEST(Quantize, LlamaQuantizeMixesGiveTheDocumentedTypes) {
    const std::string base = temp_path("mix-base.gguf"), out = temp_path("mix-out.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "256",
                          "--layers", "16", "--type", "f16", "-o", base}).exit_code, 0);
    // llama-quantize's spellings, any case; general.file_type as llama.cpp numbers them.
    const std::map<std::string, std::pair<std::string, int>> mixes = {
        {"Q5_K_S", {"q5_k_s", 16}}, {"q5_k_m", {"q5_k_m", 17}}, {"Q3_K_M", {"q3_k_m", 12}}, {"Q4_K_M", {"q4_k_m", 15}}};
    for (const auto& [spelling, want] : mixes) {
        const auto& [mix, file_type] = want;
        auto r = run_pagoda({"quantize", base, out, spelling});
        ASSERT_EQ(r.exit_code, 0) << spelling << ": " << r.err;
        const auto types = tensor_types(out);
        ASSERT_EQ(types.size(), 3u + 16u * 9u) << spelling;
        for (const auto& [name, type] : types) EXPECT_EQ(type, expected_mix_type(mix, name)) << spelling << " " << name;
        EXPECT_EQ(gguf::File::open(out)->get_int_or("general.file_type", -1), file_type) << spelling;
    }
    // A row that does not fit Q5_K's 256 falls back to Q5_1, as llama-quantize does.
    const std::string narrow = temp_path("mix-narrow.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "128", "--heads", "2", "--kv-heads", "2", "--ffn", "256",
                          "--layers", "2", "--type", "f16", "-o", narrow}).exit_code, 0);
    auto r = run_pagoda({"quantize", narrow, out, "q5_k_s"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("row length fallback"), std::string::npos) << r.out;
    const auto types = tensor_types(out);
    EXPECT_EQ(types.at("blk.0.attn_q.weight"), "q5_1");
    EXPECT_EQ(types.at("blk.0.ffn_down.weight"), "q5_K");  // 256 wide: fits
}

// The new mixes run, and stay as close to the F16 model as their bits promise: perplexity within 1 %
// (this random model's distributions are nearly flat, so perplexity moves little), and the KL
// divergence from the F16 model ordered by bits.
TEST(Quantize, KMixesRunAndStayCloseToF16) {
    const std::string stories = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(stories);
    const std::string base = temp_path("kmix-f16.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "--layers", "4", "--type", "f16", "--vocab", stories, "-o", base}).exit_code, 0);
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto perplexity = [&](const std::string& model) {
        auto r = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "128"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return field_after(r.out, "perplexity: ");
    };
    const double ppl_f16 = perplexity(base);
    ASSERT_GT(ppl_f16, 1.0);
    std::map<std::string, double> kl;
    for (const std::string mix : {"q5_k_m", "q5_k_s", "q4_k_m", "q3_k_m"}) {
        const std::string out = temp_path("kmix-" + mix + ".gguf");
        ASSERT_EQ(run_pagoda({"quantize", base, out, mix}).exit_code, 0) << mix;
        auto run = run_pagoda({"run", "-m", out, "-p", "Once upon a time", "-n", "8", "--temp", "0", "--ids"});
        EXPECT_EQ(run.exit_code, 0) << mix << ": " << run.err;
        EXPECT_FALSE(run.out.empty()) << mix;
        EXPECT_NEAR(perplexity(out) / ppl_f16, 1.0, 0.01) << mix;
        kl[mix] = kl_against(out, base);
        EXPECT_GT(kl[mix], 0.0) << mix;
    }
    EXPECT_LT(kl["q5_k_m"], kl["q5_k_s"]);
    EXPECT_LT(kl["q5_k_s"], kl["q4_k_m"]);
    EXPECT_LT(kl["q4_k_m"], kl["q3_k_m"]);
    EXPECT_LT(kl["q3_k_m"], 0.01);
}

TEST(Quantize, StoriesModelStaysCloseToItsBase) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    const std::string q8 = temp_path("s-q8.gguf"), q4 = temp_path("s-q4.gguf");
    ASSERT_EQ(run_pagoda({"quantize", base, q8, "q8_0"}).exit_code, 0);
    ASSERT_EQ(run_pagoda({"quantize", base, q4, "q4_0"}).exit_code, 0);
    const double kl8 = kl_against(q8, base), kl4 = kl_against(q4, base);
    EXPECT_GE(kl8, 0.0);
    EXPECT_LT(kl8, 0.005);
    EXPECT_GT(kl4, kl8);
    EXPECT_LT(kl4, 0.15);
}

TEST(Quantize, ClippingSearchAndCalibrationLowerInt4Error) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    // Calibrate on different text than the evaluation text.
    const std::string calib = source_dir() + "/tests/data/eval/tinystories_calib.txt";
    const std::string plain = temp_path("g32-plain.gguf"), searched = temp_path("g32-search.gguf"),
                      calibrated = temp_path("g32-calib.gguf");
    ASSERT_EQ(run_pagoda({"quantize", base, plain, "int4-g32", "--plain-minmax"}).exit_code, 0);
    ASSERT_EQ(run_pagoda({"quantize", base, searched, "int4-g32"}).exit_code, 0);
    auto c = run_pagoda({"quantize", base, calibrated, "int4-g32", "--calib", calib});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("activation-scaled"), std::string::npos) << c.out;
    const double kl_plain = kl_against(plain, base), kl_search = kl_against(searched, base),
                 kl_calib = kl_against(calibrated, base);
    EXPECT_LT(kl_search, kl_plain);
    EXPECT_LT(kl_calib, kl_search);
}

// A llama.cpp importance matrix (GGUF: NAME.in_sum2 / NAME.counts) steers the scale search: the
// output differs from the unweighted one, and its mistakes are named errors.
TEST(Quantize, ImatrixWeightsTheSearchAndIsChecked) {
    const std::string base = temp_path("qi-base.gguf"), plain = temp_path("qi-plain.gguf"), weighted = temp_path("qi-w.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "-o", base}).exit_code, 0);
    auto write_imatrix = [&](const std::string& path, int64_t bad_cols) {
        gguf::Writer w;
        w.set("imatrix.datasets", gguf::Value::strings({"test"}));
        w.set("imatrix.chunk_count", gguf::Value::u32(1));
        w.set("imatrix.chunk_size", gguf::Value::u32(512));
        auto file = gguf::File::open(base);
        for (const auto& t : file->tensors()) {
            if (t.shape.size() != 2 || t.name.rfind("blk.", 0) != 0) continue;
            const int64_t cols = bad_cols ? bad_cols : t.shape[0];
            std::vector<float> sums(static_cast<size_t>(cols));
            for (int64_t c = 0; c < cols; ++c) sums[size_t(c)] = c % 5 == 0 ? 400.f : 1.f;
            std::vector<uint8_t> bytes(sums.size() * 4), count(4);
            std::memcpy(bytes.data(), sums.data(), bytes.size());
            const float one = 4.f;
            std::memcpy(count.data(), &one, 4);
            w.add_tensor(t.name + ".in_sum2", gguf::GgmlType::F32, {cols}, std::move(bytes));
            w.add_tensor(t.name + ".counts", gguf::GgmlType::F32, {1}, std::move(count));
        }
        w.write(path);
    };
    const std::string imatrix = temp_path("qi.imatrix.gguf"), bad = temp_path("qi-bad.imatrix.gguf");
    write_imatrix(imatrix, 0);
    write_imatrix(bad, 96);
    for (const char* type : {"iq4_xs", "mxfp4"}) {
        ASSERT_EQ(run_pagoda({"quantize", base, plain, type}).exit_code, 0) << type;
        auto r = run_pagoda({"quantize", base, weighted, type, "--imatrix", imatrix});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.err.find("importance of"), std::string::npos) << r.err;
        auto a = gguf::File::open(plain), b = gguf::File::open(weighted);
        const auto* ta = a->find_tensor("blk.0.attn_q.weight");
        const auto* tb = b->find_tensor("blk.0.attn_q.weight");
        ASSERT_EQ(ta->n_bytes, tb->n_bytes);
        EXPECT_NE(std::memcmp(ta->data, tb->data, ta->n_bytes), 0) << type << ": the imatrix changed nothing";
        auto run = run_pagoda({"run", "-m", weighted, "-p", "abc", "-n", "4", "--temp", "0", "--ids"});
        EXPECT_EQ(run.exit_code, 0) << run.err;
    }
    auto wrong = run_pagoda({"quantize", base, weighted, "iq4_nl", "--imatrix", bad});
    EXPECT_EQ(wrong.exit_code, 1);
    EXPECT_NE(wrong.err.find("96 columns"), std::string::npos) << wrong.err;
    auto both = run_pagoda({"quantize", base, weighted, "iq4_nl", "--imatrix", imatrix, "--calib", imatrix});
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
    // --plain-minmax turns off a clipping search these types do not have: refused, not ignored.
    for (const char* type : {"iq4_nl", "q4_k_m", "mxfp4"}) {
        auto plain_flag = run_pagoda({"quantize", base, weighted, type, "--plain-minmax"});
        EXPECT_EQ(plain_flag.exit_code, 1) << type;
        EXPECT_NE(plain_flag.err.find("--plain-minmax: " + std::string(type) + " has no clipping search"), std::string::npos)
            << plain_flag.err;
    }
    auto grid = run_pagoda({"quantize", base, weighted, "IQ2_XXS"});
    EXPECT_NE(grid.exit_code, 0);
    EXPECT_NE(grid.err.find("iq2_xxs is not supported"), std::string::npos) << grid.err;
}

TEST(Quantize, ClearErrors) {
    auto unknown = run_pagoda({"quantize", "a.gguf", "b.gguf", "q1_k"});
    EXPECT_NE(unknown.exit_code, 0);
    EXPECT_NE(unknown.err.find("type"), std::string::npos) << unknown.err;
    auto missing = run_pagoda({"quantize", "/nonexistent.gguf", temp_path("x.gguf"), "q8_0"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace pagoda::test
