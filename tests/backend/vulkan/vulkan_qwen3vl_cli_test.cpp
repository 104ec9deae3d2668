// `pagoda run --backend vulkan --mmproj --image` on random Qwen3-VL and Gemma 3 models (gen-model
// --mmproj): the vision tower and the text model both on the device (the tower's 2D RoPE, M-RoPE,
// deep-stack slices; Gemma 3's SigLIP and bidirectional image rows), which the run's log line names,
// give the CPU backend's greedy tokens for one image and for two, and the image changes them. Greedy
// decoding on fixed random weights is deterministic, and the two backends' logits and image
// embeddings agree to 1e-5 (vulkan_qwen3vl_test.cpp, vulkan_vision_tower_test.cpp), so equal tokens
// are the expected result, not luck. --mmproj-backend / --no-mmproj-offload put the tower on another
// backend than the model's (same tokens, the log names it; run, chat and serve), and bad or
// disagreeing values are refused naming the flag.
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <png.h>
#include <sstream>

#include "backend/vulkan/vulkan_test_env.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "server/serve_harness.h"
#include "vision/image_encode.h"

namespace pagoda::test {
namespace {

struct Files {
    std::string text, mm, wide, small;
    std::string gemma_text, gemma_mm;
};

std::string png_file(const std::string& name, int w, int h, int seed) {
    std::vector<uint16_t> rgb;
    for (int i = 0; i < w * h; ++i)
        rgb.insert(rgb.end(), {uint16_t((i * 89 + seed) % 256), uint16_t((i * 23 + 5 * seed) % 256), uint16_t((i * 11) % 256)});
    const std::vector<uint8_t> bytes = encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
    const std::string path = temp_path(name);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
}

const Files& files() {
    static const Files f = [] {
        Files out{temp_path("vulkan-qwen3vl-text.gguf"), temp_path("vulkan-qwen3vl-mmproj.gguf"),
                  png_file("vulkan-qwen3vl-wide.png", 64, 48, 3), png_file("vulkan-qwen3vl-small.png", 40, 30, 4)};
        const auto r = run_pagoda({"gen-model", "--arch", "qwen3vl", "--layers", "3", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        out.gemma_text = temp_path("vulkan-gemma3-text.gguf");
        out.gemma_mm = temp_path("vulkan-gemma3-mmproj.gguf");
        const auto g = run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.gemma_text, "--mmproj", out.gemma_mm});
        EXPECT_EQ(g.exit_code, 0) << g.err;
        return out;
    }();
    return f;
}

// The run's greedy ids; with images, the log line must name the tower's backend: `tower`, by
// default the model's (`extra`: more flags).
std::vector<int32_t> greedy_ids(const std::string& backend, const std::vector<std::string>& images, bool gemma = false,
                                const std::vector<std::string>& extra = {}, std::string tower = "") {
    if (tower.empty()) tower = backend;
    std::vector<std::string> args = {"run", "-m", gemma ? files().gemma_text : files().text, "-p", "the cat", "-n", "10",
                                     "--temp", "0", "--ids", "--ignore-eos", "-t", "1", "--backend", backend};
    args.insert(args.end(), extra.begin(), extra.end());
    if (!images.empty()) args.insert(args.end(), {"--mmproj", gemma ? files().gemma_mm : files().mm});
    for (const std::string& image : images) args.insert(args.end(), {"--image", image});
    const auto r = run_pagoda(args);
    EXPECT_EQ(r.exit_code, 0) << backend << ": " << r.err;
    if (!images.empty()) {
        const std::string line = fmt::format("{} vision tower on the {} backend", gemma ? "gemma3" : "qwen3vl_merger", tower);
        EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
    }
    std::istringstream in(r.out);
    std::vector<int32_t> ids;
    for (int32_t id; in >> id;) ids.push_back(id);
    EXPECT_EQ(ids.size(), 10u) << backend << ": " << r.out;
    return ids;
}

TEST(VulkanQwen3VlRun, ImagesGiveTheCpuBackendsTokens) {
    PAGODA_REQUIRE_VULKAN();
    const auto wide = greedy_ids("vulkan", {files().wide});
    EXPECT_EQ(wide, greedy_ids("cpu", {files().wide}));
    EXPECT_NE(wide, greedy_ids("vulkan", {})) << "the image changes the tokens";
    EXPECT_EQ(greedy_ids("vulkan", {files().wide, files().small}), greedy_ids("cpu", {files().wide, files().small}));
}

TEST(VulkanImageRun, Gemma3ImagesGiveTheCpuBackendsTokens) {
    PAGODA_REQUIRE_VULKAN();
    const auto wide = greedy_ids("vulkan", {files().wide}, true);
    EXPECT_EQ(wide, greedy_ids("cpu", {files().wide}, true));
    EXPECT_NE(wide, greedy_ids("vulkan", {}, true)) << "the image changes the tokens";
    EXPECT_EQ(greedy_ids("vulkan", {files().wide, files().small}, true),
              greedy_ids("cpu", {files().wide, files().small}, true));
}

TEST(VulkanImageRun, MmprojBackendPutsTheTowerApart) {
    PAGODA_REQUIRE_VULKAN();
    // The text model on the device, the tower on the CPU (a GPU short of memory for both): the same tokens.
    const auto want = greedy_ids("cpu", {files().wide});
    EXPECT_EQ(greedy_ids("vulkan", {files().wide}, false, {"--mmproj-backend", "cpu"}, "cpu"), want);
    EXPECT_EQ(greedy_ids("vulkan", {files().wide}, false, {"--no-mmproj-offload"}, "cpu"), want);
    // And the other way round: the tower on the device beside a CPU model.
    EXPECT_EQ(greedy_ids("cpu", {files().wide}, false, {"--mmproj-backend", "vulkan"}, "vulkan"), want);
}

TEST(MmprojBackend, BadValuesAreRefusedByName) {
    auto run = [](const std::vector<std::string>& extra) {
        std::vector<std::string> args = {"run", "-m", files().text, "-p", "x", "-n", "1", "--mmproj", files().mm,
                                         "--image", files().small};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_pagoda(args);
    };
    const auto bogus = run({"--mmproj-backend", "metal"});
    EXPECT_NE(bogus.exit_code, 0);
    EXPECT_NE(bogus.err.find("--mmproj-backend"), std::string::npos) << bogus.err;
    EXPECT_NE(bogus.err.find("metal"), std::string::npos) << bogus.err;
    const auto both = run({"--no-mmproj-offload", "--mmproj-backend", "reference"});
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.err.find("--no-mmproj-offload runs the vision tower on the cpu backend, but --mmproj-backend says "
                            "reference"),
              std::string::npos)
        << both.err;
    // A CPU model with its tower on the reference backend (any build): the log names it.
    const auto ref = run({"--mmproj-backend", "reference"});
    EXPECT_EQ(ref.exit_code, 0) << ref.err;
    EXPECT_NE(ref.err.find("qwen3vl_merger vision tower on the reference backend"), std::string::npos) << ref.err;
    // serve and chat read the same flags.
    ServeProcess server({"--mmproj", files().mm, "--no-mmproj-offload", "--backend", "reference"}, files().text);
    EXPECT_NE(server.log().find("qwen3vl_merger vision tower on the cpu backend"), std::string::npos) << server.log();
    const auto chat = run_pagoda({"chat", "-m", files().text, "--mmproj", files().mm, "--mmproj-backend", "reference"}, "");
    EXPECT_EQ(chat.exit_code, 0) << chat.err;
    EXPECT_NE(chat.err.find("qwen3vl_merger vision tower on the reference backend"), std::string::npos) << chat.err;
}

}  // namespace
}  // namespace pagoda::test
