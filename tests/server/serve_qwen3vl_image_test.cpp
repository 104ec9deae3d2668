// Qwen3-VL images through `pagoda serve --mmproj` on a random Qwen3-VL and its random
// qwen3vl_merger projector (gen-model --arch qwen3vl --mmproj). With a chat template that renders an
// image part as Qwen's <|vision_start|><|image_pad|><|vision_end|> and nothing around the content, a
// chat completion with an image_url part lays out the very prompt `pagoda run --image` does, and
// gives the same greedy tokens (the engine's M-RoPE positions against SequenceRunner's); the
// /v1/completions prompt object ({prompt_string with <__media__>, multimodal_data}) and the
// Responses input_image do too. Through chatml (which takes no content parts) the marker goes into
// the joined text. An image's token count follows its size (usage.prompt_tokens); a repeated image
// is a prefix-cache hit; a corrupt image and one over --max-image-tokens are 400s naming the part
// (and the limit).
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <png.h>

#include "core/base64.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "server/serve_harness.h"
#include "vision/image_encode.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

constexpr int kPredict = 10;

std::vector<uint8_t> png(int w, int h, int seed) {
    std::vector<uint16_t> rgb;
    for (int i = 0; i < w * h; ++i)
        rgb.insert(rgb.end(), {uint16_t((i * 97 + seed) % 256), uint16_t((i * 31 + 7 * seed) % 256), uint16_t((i * 13) % 256)});
    return encode_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
}

struct Files {
    std::string text, mm, image, template_file;
    std::vector<uint8_t> wide, small;  // 64 x 48 pixels: 4 x 3 merged tokens; 40 x 30 (to 32 x 32): 2 x 2
};

const Files& files() {
    static const Files f = [] {
        Files out{temp_path("serve-qwen3vl-text.gguf"), temp_path("serve-qwen3vl-mmproj.gguf"),
                  temp_path("serve-qwen3vl-wide.png"), temp_path("serve-qwen3vl.jinja"), png(64, 48, 1), png(40, 30, 3)};
        const auto r = run_pagoda({"gen-model", "--arch", "qwen3vl", "--layers", "3", "--dim", "64", "--heads", "4",
                                   "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::ofstream(out.image, std::ios::binary)
            .write(reinterpret_cast<const char*>(out.wide.data()), std::streamsize(out.wide.size()));
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

std::string data_url(const std::vector<uint8_t>& bytes) { return "data:image/png;base64," + pagoda::encode_base64(bytes); }

json post(int port, const std::string& path, const json& body) {
    const HttpResult r = http_request(port, "POST", path, body.dump());
    json j = json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
    if (j.is_discarded()) j = {{"raw", r.body}};
    j["_status"] = r.status;
    return j;
}

json chat(int port, const std::string& url, const std::string& text = "the cat") {
    return post(port, "/v1/chat/completions",
                {{"messages", json::array({{{"role", "user"},
                                            {"content", json::array({{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                                                     {{"type", "text"}, {"text", text}}})}}})},
                 {"max_tokens", kPredict}, {"temperature", 0}, {"ignore_eos", true}});
}

// `pagoda run --image` on the same files: its greedy text.
std::string run_text() {
    const auto r = run_pagoda({"run", "-m", files().text, "-p", "the cat", "-n", std::to_string(kPredict), "--temp",
                               "0", "--ignore-eos", "-t", "1", "--mmproj", files().mm, "--image", files().image});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string text = r.out;
    if (!text.empty() && text.back() == '\n') text.pop_back();  // run ends its output with a newline
    return text;
}

TEST(ServeQwen3VlImage, ChatImageUrlGivesTheTokensOfRunImage) {
    const std::string want = run_text();
    ASSERT_FALSE(want.empty());
    ServeProcess server({"--mmproj", files().mm, "--chat-template", files().template_file}, files().text);
    const json a = chat(server.port(), data_url(files().wide));
    ASSERT_EQ(a["_status"], 200) << a.dump();
    EXPECT_EQ(a["choices"][0]["message"]["content"], want);
    EXPECT_EQ(a["usage"]["completion_tokens"], kPredict);
    const int64_t with_wide = a["usage"]["prompt_tokens"];
    // The same picture again: the same tokens, its prompt served from the prefix cache.
    const json again = chat(server.port(), data_url(files().wide));
    ASSERT_EQ(again["_status"], 200) << again.dump();
    EXPECT_EQ(again["choices"][0]["message"]["content"], want);
    EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0) << again.dump();
    // A smaller picture takes fewer tokens: 2 x 2 merged tokens against 4 x 3.
    const json small = chat(server.port(), data_url(files().small));
    ASSERT_EQ(small["_status"], 200) << small.dump();
    EXPECT_EQ(with_wide - small["usage"]["prompt_tokens"].get<int64_t>(), 12 - 4);
    EXPECT_NE(small["choices"][0]["message"]["content"], want);
    // /v1/completions' prompt object lays the image out as run does too.
    const json c = post(server.port(), "/v1/completions",
                        {{"prompt", {{"prompt_string", "<__media__>the cat"}, {"multimodal_data", {pagoda::encode_base64(files().wide)}}}},
                         {"max_tokens", kPredict}, {"temperature", 0}, {"ignore_eos", true}});
    ASSERT_EQ(c["_status"], 200) << c.dump();
    EXPECT_EQ(c["choices"][0]["text"], want);
    // The Responses API's input_image is the same image part.
    const json r = post(server.port(), "/v1/responses",
                        {{"input", json::array({{{"role", "user"},
                                                 {"content", json::array({{{"type", "input_image"},
                                                                           {"image_url", data_url(files().wide)}},
                                                                          {{"type", "input_text"}, {"text", "the cat"}}})}}})},
                         {"max_output_tokens", kPredict}, {"temperature", 0}, {"store", false}});
    ASSERT_EQ(r["_status"], 200) << r.dump();
    EXPECT_EQ(r["usage"]["input_tokens"], with_wide) << r.dump();
}

TEST(ServeQwen3VlImage, ChatmlJoinsTheMarkerAndBadImagesAreRefusedByPart) {
    ServeProcess server({"--mmproj", files().mm, "--max-image-tokens", "8"}, files().text);
    const json ok = chat(server.port(), data_url(files().small));
    ASSERT_EQ(ok["_status"], 200) << ok.dump();
    EXPECT_EQ(ok["usage"]["completion_tokens"], kPredict);
    // 12 tokens, more than the 8 one step takes.
    const json big = chat(server.port(), data_url(files().wide));
    EXPECT_EQ(big["_status"], 400) << big.dump();
    EXPECT_EQ(big["error"]["param"], "messages[0].content[0]") << big.dump();
    const std::string message = big["error"]["message"];
    EXPECT_NE(message.find("an image of 12 tokens (a 3 x 4 grid after resizing), more than the 8 image tokens"),
              std::string::npos)
        << message;
    std::vector<uint8_t> corrupt = files().wide;
    corrupt.resize(corrupt.size() / 2);
    const json bad = chat(server.port(), data_url(corrupt));
    EXPECT_EQ(bad["_status"], 400) << bad.dump();
    EXPECT_EQ(bad["error"]["param"], "messages[0].content[0]") << bad.dump();
    EXPECT_NE(bad["error"]["message"].get<std::string>().find("not a readable image"), std::string::npos) << bad.dump();
    // The server still answers.
    EXPECT_EQ(chat(server.port(), data_url(files().small))["_status"], 200);
}

}  // namespace
