// The compute seam, checked on the source tree: nothing in src/server, src/engine or apps/ includes a
// backend, a kernel or the model's internals — only the model's public headers (the StepModel seam,
// its factory, the Batch, and the tools' entry points) — and every folder includes only folders
// below it in the layer order. A new include that breaks the seam fails here, not in review.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fixtures.h"

namespace pagoda::test {
namespace {

namespace fs = std::filesystem;

// What the layers above compute may include from src/model.
const std::set<std::string> kModelPublic = {
    "model/batch.h",          "model/step_model.h",  "model/open_step_model.h", "model/kv_options.h",
    "model/sequence_runner.h", "model/calibration.h", "model/random_model.h",    "model/config.h",
    "model/model_file.h",     "model/system_fingerprint.h", "model/devices.h", "model/classifier_head.h",
    "model/mrope_position.h",
};

// Folder -> folders of src/ it must not include (those above it, and compute's insides).
struct Rule {
    std::string folder;
    std::vector<std::string> forbidden;
};
const std::vector<Rule> kRules = {
    // arch: one description per architecture, read by hf and model; it includes nothing of pagoda.
    {"src/arch", {"core/", "gguf/", "hf/", "quant/", "tokenizer/", "chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/core", {"arch/", "gguf/", "hf/", "quant/", "tokenizer/", "chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/gguf", {"arch/", "hf/", "quant/", "tokenizer/", "chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/hf", {"quant/", "tokenizer/", "chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    // LoRA adapters: files read against a base model's GGUF; the model layer binds them.
    {"src/lora", {"tokenizer/", "chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/kv", {"backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/grammar", {"chat/", "kv/", "backend/", "model/", "engine/", "server/", "tune/", "vision/"}},
    {"src/backend", {"model/", "engine/", "server/", "tokenizer/", "tune/", "vision/"}},
    {"src/model", {"engine/", "server/", "tune/", "vision/"}},
    // vision: images in (decoding, preprocessing) and the vision towers, on the model's graph.
    {"src/vision", {"tokenizer/", "chat/", "engine/", "server/", "tune/"}},
    {"src/engine", {"server/", "backend/", "tune/"}},
    {"src/server", {"backend/", "tune/"}},
    // tune measures kernels and step models for the commands; nothing below it knows it exists.
    {"src/tune", {"engine/", "server/"}},
    {"apps", {"backend/"}},
};

std::vector<std::pair<std::string, std::string>> includes_under(const std::string& folder) {
    std::vector<std::pair<std::string, std::string>> out;  // file, included path
    const fs::path root = fs::path(pagoda::test::source_dir()) / folder;
    if (!fs::exists(root)) return out;
    const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file()) continue;
        const auto ext = e.path().extension();
        if (ext != ".h" && ext != ".cpp") continue;
        std::ifstream in(e.path());
        std::smatch m;
        for (std::string line; std::getline(in, line);)
            if (std::regex_search(line, m, include)) out.emplace_back(fs::relative(e.path(), pagoda::test::source_dir()).string(), m[1]);
    }
    return out;
}

TEST(IncludeRules, LayersIncludeOnlyWhatIsBelowThem) {
    for (const auto& rule : kRules)
        for (const auto& [file, path] : includes_under(rule.folder))
            for (const auto& bad : rule.forbidden) EXPECT_NE(path.rfind(bad, 0), 0u) << file << " includes " << path;
}

TEST(IncludeRules, AboveTheSeamOnlyThePublicModelHeaders) {
    size_t checked = 0;
    for (const std::string folder : {"src/server", "src/engine", "apps"})
        for (const auto& [file, path] : includes_under(folder)) {
            EXPECT_NE(path.rfind("kernels/", 0), 0u) << file << " includes " << path;
            if (path.rfind("model/", 0) == 0) {
                EXPECT_TRUE(kModelPublic.count(path)) << file << " includes the model internal " << path;
                ++checked;
            }
        }
    EXPECT_GT(checked, 0u) << "no model include found above the seam: the scan found no sources";
}

// The build enforces the seam too (cmake/layers.cmake: the engine and server layers compile against
// an include root holding only PAGODA_MODEL_PUBLIC of src/model); the two lists must agree.
TEST(IncludeRules, TheBuildsModelSeamListsThePublicHeaders) {
    std::ifstream in(fs::path(pagoda::test::source_dir()) / "cmake" / "layers.cmake");
    ASSERT_TRUE(in) << "cmake/layers.cmake is missing";
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t at = text.find("set(PAGODA_MODEL_PUBLIC");
    ASSERT_NE(at, std::string::npos);
    const std::string list = text.substr(at, text.find(')', at) - at);
    std::set<std::string> in_build;
    const std::regex header(R"(model/[a-z_]+\.h)");
    for (std::sregex_iterator it(list.begin(), list.end(), header), end; it != end; ++it) in_build.insert(it->str());
    for (const std::string& h : kModelPublic) EXPECT_TRUE(in_build.count(h)) << h << " is public here but not in the build's seam";
    for (const std::string& h : in_build)  // op_times.h: step_model.h's own include, not for direct use
        EXPECT_TRUE(kModelPublic.count(h) || h == "model/op_times.h") << h << " is in the build's seam but not public here";
}

}  // namespace
}  // namespace pagoda::test
