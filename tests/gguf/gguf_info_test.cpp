// Drives `pagoda gguf-info` on a file written here and on the stories260K fixture.
#include <array>
#include <cstdio>
#include <sys/wait.h>

#include "fixtures.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {
namespace {

struct Result { int status; std::string out; };

Result run_info(const std::string& args) {
    std::string cmd = pagoda::test::pagoda_binary() + " gguf-info " + args + " 2>&1";
    Result r{-1, ""};
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int rc = pclose(p);
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return r;
}

bool has(const std::string& out, const std::string& s) { return out.find(s) != std::string::npos; }

TEST(GgufInfo, PrintsHeaderMetadataAndTensors) {
    Writer w;
    w.set("general.architecture", Value::string("llama"));
    std::vector<std::string> many;
    for (int i = 0; i < 20; ++i) many.push_back("tok" + std::to_string(i));
    w.set("tokens", Value::strings(many));
    w.add_tensor("blk.0.w", GgmlType::Q8_0, {64, 2}, std::vector<uint8_t>(136, 0));
    std::string path = pagoda::test::temp_path("info.gguf");
    w.write(path);

    Result r = run_info(path);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "version: 3")) << r.out;
    EXPECT_TRUE(has(r.out, "alignment: 32")) << r.out;
    EXPECT_TRUE(has(r.out, "metadata: 2 keys")) << r.out;
    EXPECT_TRUE(has(r.out, "\"llama\"")) << r.out;
    EXPECT_TRUE(has(r.out, "array[string;20]")) << r.out;
    EXPECT_TRUE(has(r.out, "\"tok7\", ... +12 more]")) << r.out;
    EXPECT_FALSE(has(r.out, "tok19")) << r.out;
    EXPECT_TRUE(has(r.out, "blk.0.w")) << r.out;
    EXPECT_TRUE(has(r.out, "q8_0")) << r.out;
    EXPECT_TRUE(has(r.out, "[64, 2]")) << r.out;
    EXPECT_TRUE(has(r.out, "total: 1 tensors, 128 elements, 136 bytes")) << r.out;

    Result all = run_info(path + " --all");
    ASSERT_EQ(all.status, 0) << all.out;
    EXPECT_TRUE(has(all.out, "\"tok19\"]")) << all.out;
}

TEST(GgufInfo, NamesTheCodebookTypes) {
    // A mixed file (as llama.cpp's IQ / MXFP4 uploads are): every tensor's type printed by name.
    Writer w;
    w.set("general.architecture", Value::string("llama"));
    const std::pair<GgmlType, const char*> types[] = {
        {GgmlType::IQ4_NL, "iq4_nl"},   {GgmlType::IQ4_XS, "iq4_xs"}, {GgmlType::MXFP4, "mxfp4"},
        {GgmlType::IQ2_XXS, "iq2_xxs"}, {GgmlType::IQ2_XS, "iq2_xs"}, {GgmlType::IQ2_S, "iq2_s"},
        {GgmlType::IQ3_XXS, "iq3_xxs"}, {GgmlType::IQ3_S, "iq3_s"},   {GgmlType::IQ1_S, "iq1_s"},
        {GgmlType::IQ1_M, "iq1_m"},     {GgmlType::Q4_K, "q4_K"},     {GgmlType::Q5_0, "q5_0"}};
    int i = 0;
    for (const auto& [type, name] : types)
        w.add_tensor("blk.0.w" + std::to_string(i++), type, {256, 1}, std::vector<uint8_t>(size_t(*row_size(type, 256)), 0));
    const std::string path = pagoda::test::temp_path("info_codebook.gguf");
    w.write(path);
    Result r = run_info(path);
    ASSERT_EQ(r.status, 0) << r.out;
    for (const auto& [type, name] : types) EXPECT_TRUE(has(r.out, std::string(" ") + name)) << name << "\n" << r.out;
}

TEST(GgufInfo, ReportsErrors) {
    std::string path = pagoda::test::temp_path("not-gguf.bin");
    FILE* f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    fputs("hello world, not a model", f);
    fclose(f);
    Result r = run_info(path);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "not a GGUF file")) << r.out;
    EXPECT_TRUE(has(r.out, path)) << r.out;
}

TEST(GgufInfo, Stories260K) {
    std::string path = pagoda::test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(path);
    Result r = run_info(path);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "token_embd.weight")) << r.out;
    EXPECT_TRUE(has(r.out, "[64, 512]")) << r.out;
    EXPECT_TRUE(has(r.out, "array[string;512]")) << r.out;
}

}  // namespace
}  // namespace pagoda::gguf
