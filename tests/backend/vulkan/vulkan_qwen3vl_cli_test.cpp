// `pagoda run --backend vulkan --mmproj --image` on random Qwen3-VL and Gemma 3 models (gen-model
// --mmproj): the vision tower and the text model both on the device (the tower's 2D RoPE, M-RoPE,
// deep-stack slices; Gemma 3's SigLIP and bidirectional image rows), which the run's log line names,
// give the CPU backend's greedy tokens for one image and for two, and the image changes them. Greedy
// decoding on fixed random weights is deterministic, and the two backends' logits and image
// embeddings agree to 1e-5 (vulkan_qwen3vl_test.cpp, vulkan_vision_tower_test.cpp), so equal tokens
// are the expected result, not luck.
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <png.h>
#include <sstream>

#include "backend/vulkan/vulkan_test_env.h"
#include "e2e/process.h"
#include "fixtures.h"
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

// The run's greedy ids; with images, the log line must name the tower's backend: the model's.
std::vector<int32_t> greedy_ids(const std::string& backend, const std::vector<std::string>& images, bool gemma = false) {
    std::vector<std::string> args = {"run", "-m", gemma ? files().gemma_text : files().text, "-p", "the cat", "-n", "10",
                                     "--temp", "0", "--ids", "--ignore-eos", "-t", "1", "--backend", backend};
    if (!images.empty()) args.insert(args.end(), {"--mmproj", gemma ? files().gemma_mm : files().mm});
    for (const std::string& image : images) args.insert(args.end(), {"--image", image});
    const auto r = run_pagoda(args);
    EXPECT_EQ(r.exit_code, 0) << backend << ": " << r.err;
    if (!images.empty()) {
        const std::string line = fmt::format("{} vision tower on the {} backend", gemma ? "gemma3" : "qwen3vl_merger", backend);
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

}  // namespace
}  // namespace pagoda::test
