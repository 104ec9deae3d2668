// `pagoda serve --backend vulkan --mmproj` on a random Qwen3-VL: the vision tower runs on the device
// (the log says so) beside the text model, two backends over one Vulkan device and queue. Four chat
// requests with images sent at once (two pictures of different sizes, the encoded-image cache off so
// every request runs the tower while others decode) each give the greedy text the CPU server gives
// for the same request alone. The backends' logits and image embeddings agree to 1e-5
// (vulkan_qwen3vl_test.cpp, vulkan_vision_tower_test.cpp), so equal greedy text is expected.
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <png.h>
#include <thread>

#include "backend/vulkan/vulkan_test_env.h"
#include "core/base64.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "server/serve_harness.h"
#include "vision/image_encode.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

struct Files {
    std::string text, mm, template_file;
    std::vector<std::string> urls;  // 64 x 48 pixels (12 merged tokens), 40 x 30 (4)
};

std::string data_url(int w, int h, int seed) {
    std::vector<uint16_t> rgb;
    for (int i = 0; i < w * h; ++i)
        rgb.insert(rgb.end(), {uint16_t((i * 97 + seed) % 256), uint16_t((i * 31 + 7 * seed) % 256), uint16_t((i * 13) % 256)});
    return "data:image/png;base64," + encode_base64(encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb));
}

const Files& files() {
    static const Files f = [] {
        Files out{temp_path("vulkan-serve-qwen3vl.gguf"), temp_path("vulkan-serve-qwen3vl-mmproj.gguf"),
                  temp_path("vulkan-serve-qwen3vl.jinja"), {data_url(64, 48, 1), data_url(40, 30, 3)}};
        const auto r = run_pagoda({"gen-model", "--arch", "qwen3vl", "--layers", "3", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        // Qwen3-VL's rendering of an image part, and the content alone around it.
        std::ofstream(out.template_file)
            << "{%- for message in messages %}{%- if message.content is string %}{{ message.content }}{%- else %}"
               "{%- for part in message.content %}{%- if part.type == 'image' %}<|vision_start|><|image_pad|>"
               "<|vision_end|>{%- elif part.type == 'text' %}{{ part.text }}{%- endif %}{%- endfor %}{%- endif %}"
               "{%- endfor %}";
        return out;
    }();
    return f;
}

// Request i: picture i % 2 and its own text; the reply's content, or the error body.
std::string chat(int port, int i) {
    const json body = {
        {"messages", json::array({{{"role", "user"},
                                   {"content", json::array({{{"type", "image_url"}, {"image_url", {{"url", files().urls[size_t(i % 2)]}}}},
                                                            {{"type", "text"}, {"text", fmt::format("the cat {}", i)}}})}}})},
        {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
    const HttpResult r = http_request(port, "POST", "/v1/chat/completions", body.dump());
    if (r.status != 200) return fmt::format("status {}: {}", r.status, r.body);
    return json::parse(r.body)["choices"][0]["message"]["content"].get<std::string>();
}

TEST(VulkanServeImage, ConcurrentImagesGiveTheCpuServersText) {
    PAGODA_REQUIRE_VULKAN();
    constexpr int kRequests = 4;
    std::vector<std::string> want(kRequests), got(kRequests);
    {
        ServeProcess cpu({"--backend", "cpu", "--mmproj", files().mm, "--chat-template", files().template_file}, files().text);
        for (int i = 0; i < kRequests; ++i) want[size_t(i)] = chat(cpu.port(), i);
    }
    ServeProcess vk({"--backend", "vulkan", "--mmproj", files().mm, "--chat-template", files().template_file,
                     "--image-cache-mb", "0"},
                    files().text);
    EXPECT_NE(vk.log().find("qwen3vl_merger vision tower on the vulkan backend"), std::string::npos) << vk.log();
    std::vector<std::thread> clients;
    for (int i = 0; i < kRequests; ++i) clients.emplace_back([&, i] { got[size_t(i)] = chat(vk.port(), i); });
    for (auto& c : clients) c.join();
    for (int i = 0; i < kRequests; ++i) {
        EXPECT_FALSE(want[size_t(i)].empty()) << i;
        EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "request " << i;
    }
    EXPECT_NE(want[0], want[1]) << "the picture changes the text";
}

}  // namespace
}  // namespace pagoda::test
