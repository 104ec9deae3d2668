// lora/lora_spec.h: the one NAME=PATH[:SCALE] reading that --lora, lora-merge and models.json share.
#include "lora/lora_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace pagoda::lora {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& text, const std::string& what, const fs::path& dir = {}) {
    try {
        parse_lora_spec(text, what, dir);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

class LoraSpecTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("pagoda_lora_spec_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path touch(const std::string& name) {
        const fs::path p = dir_ / name;
        std::ofstream(p) << "x";
        return p;
    }
    fs::path dir_;
};

TEST_F(LoraSpecTest, NamePathAndScale) {
    LoraSpec s = parse_lora_spec("sql=adapters/sql.gguf:0.5", "--lora x");
    EXPECT_EQ(s.name, "sql");
    EXPECT_EQ(s.path, "adapters/sql.gguf");
    EXPECT_EQ(s.scale, 0.5f);
    s = parse_lora_spec("sql=sql.gguf", "");
    EXPECT_EQ(s.path, "sql.gguf");
    EXPECT_EQ(s.scale, 1.0f);
    s = parse_lora_spec("neg=a.gguf:-2e-1", "");
    EXPECT_EQ(s.scale, -0.2f);
    // The name ends at the first '='; the path may hold more of them.
    s = parse_lora_spec("a=x=y.gguf", "");
    EXPECT_EQ(s.name, "a");
    EXPECT_EQ(s.path, "x=y.gguf");
    // A trailing ':' is part of the path, not an empty scale.
    s = parse_lora_spec("a=odd:", "");
    EXPECT_EQ(s.path, "odd:");
    EXPECT_EQ(s.scale, 1.0f);
}

TEST_F(LoraSpecTest, AnExistingFileWithAColonWinsOverTheScale) {
    const fs::path file = touch("v1:2");
    LoraSpec s = parse_lora_spec("a=" + file.string(), "");
    EXPECT_EQ(s.path, file.string());
    EXPECT_EQ(s.scale, 1.0f);
    // The same file with a scale after it: the whole text does not exist, so the suffix is the scale.
    s = parse_lora_spec("a=" + file.string() + ":3", "");
    EXPECT_EQ(s.path, file.string());
    EXPECT_EQ(s.scale, 3.0f);
    // Relative to `dir` (models.json's folder); the returned path stays as written.
    s = parse_lora_spec("a=v1:2", "", dir_);
    EXPECT_EQ(s.path, "v1:2");
    EXPECT_EQ(s.scale, 1.0f);
    // Without `dir` the relative name does not exist here, so ":2" is a scale.
    s = parse_lora_spec("a=v1:2", "");
    EXPECT_EQ(s.path, "v1");
    EXPECT_EQ(s.scale, 2.0f);
}

TEST_F(LoraSpecTest, ErrorsNameWhatIsWrong) {
    EXPECT_EQ(error_of("sql=sql.gguf:half", "--lora sql=sql.gguf:half"),
              "--lora sql=sql.gguf:half: the scale 'half' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf:half", ""), "the scale 'half' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf:1.5x", ""), "the scale '1.5x' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf: 2", ""), "the scale ' 2' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf:inf", ""), "the scale 'inf' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf:nan", ""), "the scale 'nan' is not a number");
    EXPECT_EQ(error_of("sql=sql.gguf:1e99", ""), "the scale '1e99' is not a number");
    EXPECT_EQ(error_of("=sql.gguf", "--lora =sql.gguf"), "--lora =sql.gguf: the adapter name before '=' is empty");
    EXPECT_EQ(error_of("sql=", ""), "no adapter path");
    EXPECT_EQ(error_of("sql=:2", ""), "no adapter path");
    EXPECT_EQ(error_of("sql.gguf", ""), "'sql.gguf' must be NAME=PATH[:SCALE]");
}

TEST_F(LoraSpecTest, PathWithoutAName) {
    LoraSpec s = parse_lora_path("a.gguf:0.25", "");
    EXPECT_TRUE(s.name.empty());
    EXPECT_EQ(s.path, "a.gguf");
    EXPECT_EQ(s.scale, 0.25f);
    const fs::path file = touch("b:1");
    s = parse_lora_path(file.string(), "");
    EXPECT_EQ(s.path, file.string());
    EXPECT_EQ(s.scale, 1.0f);
    EXPECT_EQ(parse_lora_scale("2", "x"), 2.0f);
    EXPECT_THROW(parse_lora_scale("", "x"), Error);
}

}  // namespace
}  // namespace pagoda::lora
