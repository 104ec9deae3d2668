// Images in chat requests: each API's image part as its parser checks and translates it (Chat
// Completions image_url, Responses input_image, Anthropic image blocks: all an image_url part with a
// data: URL), the refusals naming the part, and ImageInput on a random Gemma 3 and its random
// projector (gen-model --mmproj): encoding, the content hash, corrupt and unsupported images, and
// the expansion of the template's image markers into Gemma 3's layout.
#include <fstream>
#include <gtest/gtest.h>
#include <png.h>

#include "core/base64.h"
#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/image_input.h"
#include "server/openai_request.h"
#include "server/responses_request.h"
#include "tokenizer/tokenizer.h"
#include "vision/data_url.h"
#include "vision/image_encode.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::vector<uint8_t> png(uint16_t shade) {
    std::vector<uint16_t> px;
    for (int i = 0; i < 12 * 10; ++i) px.insert(px.end(), {shade, uint16_t((i * 7) % 256), 40});
    return test::encode_png(12, 10, PNG_COLOR_TYPE_RGB, 8, px);
}

std::string data_url(uint16_t shade) { return "data:image/png;base64," + pagoda::encode_base64(png(shade)); }

ApiError chat_error(const json& content) {
    try {
        parse_completion_request(json{{"messages", json::array({{{"role", "user"}, {"content", content}}})}},
                                 Endpoint::chat_completions);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "accepted", "");
}

TEST(ImageParts, ChatCompletionsImageUrlPartsAreCheckedAndFound) {
    const json ok = json::array({{{"type", "text"}, {"text", "what is it?"}},
                                 {{"type", "image_url"}, {"image_url", {{"url", data_url(9)}, {"detail", "auto"}}}}});
    const CompletionParams p = parse_completion_request(
        json{{"messages", json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", ok}}})}},
        Endpoint::chat_completions);
    const auto parts = image_parts(p.messages);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].where, "messages[1].content[1]");
    EXPECT_EQ(parts[0].url, data_url(9));

    auto refused = [](json image_url, const std::string& param, const std::string& words) {
        const ApiError e = chat_error(json::array({{{"type", "image_url"}, {"image_url", image_url}}}));
        EXPECT_EQ(e.status, 400) << image_url.dump();
        EXPECT_EQ(e.param, param) << e.what();
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    };
    // A well-formed http(s) URL passes the parser (the gateway fetches it only with --allow-image-urls).
    EXPECT_EQ(chat_error(json::array({{{"type", "image_url"}, {"image_url", {{"url", "https://example.com/cat.png"}}}}}))
                  .status,
              0);
    refused({{"url", "https://user:pw@example.com/cat.png"}}, "messages[0].content[0].image_url.url",
            "not a usable image URL: URLs with user:password@ are not fetched");
    refused({{"url", "http://exa mple.com/"}}, "messages[0].content[0].image_url.url", "space or a control character");
    refused({{"url", "file:///etc/passwd"}}, "messages[0].content[0].image_url.url", "must be a data: URL");
    refused({{"url", data_url(1)}, {"detail", "high"}}, "messages[0].content[0].image_url.detail", "only \"auto\"");
    refused({{"url", data_url(1)}, {"format", "png"}}, "messages[0].content[0].image_url.format", "not a field");
    refused({{"detail", "auto"}}, "messages[0].content[0].image_url.url", "must be a string");
    refused("data:image/png;base64,AAAA", "messages[0].content[0].image_url", "must be an object");
    const ApiError extra = chat_error(
        json::array({{{"type", "image_url"}, {"image_url", {{"url", data_url(1)}}}, {"cache", true}}}));
    EXPECT_EQ(extra.param, "messages[0].content[0].cache");
}

TEST(ImageParts, ResponsesInputImageBecomesAnImageUrlPart) {
    const json input = json::array(
        {{{"role", "user"},
          {"content", json::array({{{"type", "input_text"}, {"text", "describe"}},
                                   {{"type", "input_image"}, {"image_url", data_url(3)}, {"detail", "auto"}}})}}});
    const ResponsesRequest r = parse_responses_request(json{{"input", input}});
    const auto body = responses_chat_body(r, r.input_items);
    const json messages = json(body)["messages"];
    const auto parts = image_parts(messages);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].url, data_url(3));
    EXPECT_EQ(messages.back()["content"][0]["text"], "describe");
    // The chat parser takes the translation as it is.
    EXPECT_NO_THROW(parse_completion_request(json(body), Endpoint::chat_completions));

    auto refused = [](json part, const std::string& param) {
        try {
            parse_responses_request(json{{"input", json::array({{{"role", "user"}, {"content", json::array({part})}}})}});
            ADD_FAILURE() << "accepted " << part.dump();
        } catch (const ApiError& e) {
            EXPECT_EQ(e.param, param) << e.what();
        }
    };
    refused({{"type", "input_image"}, {"image_url", "https://example.com:99999/a.png"}}, "input[0].content[0].image_url.url");
    refused({{"type", "input_image"}, {"file_id", "file-1"}}, "input[0].content[0].file_id");
    refused({{"type", "input_image"}, {"image_url", data_url(3)}, {"detail", "low"}},
            "input[0].content[0].image_url.detail");
}

TEST(ImageParts, AnthropicImageBlockBecomesADataUrlPart) {
    const std::string b64 = pagoda::encode_base64(png(5));
    const json body = {{"model", "m"}, {"max_tokens", 8},
                       {"messages", json::array({{{"role", "user"},
                                                  {"content", json::array({{{"type", "image"},
                                                                            {"source", {{"type", "base64"},
                                                                                        {"media_type", "image/png"},
                                                                                        {"data", b64}}}},
                                                                           {{"type", "text"}, {"text", "what?"}}})}}})}};
    const AnthropicRequest r = translate_anthropic_request(body, MessagesRoute::messages);
    const auto parts = image_parts(json(r.chat_body)["messages"]);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].url, "data:image/png;base64," + b64);
    EXPECT_NO_THROW(parse_completion_request(json(r.chat_body), Endpoint::chat_completions));

    auto refused = [&](json block, const std::string& role, const std::string& param, const std::string& words) {
        json b = body;
        b["messages"] = json::array({{{"role", role}, {"content", json::array({block})}}});
        if (role == "assistant") b["messages"].insert(b["messages"].begin(), json{{"role", "user"}, {"content", "a"}});
        try {
            translate_anthropic_request(b, MessagesRoute::messages);
            ADD_FAILURE() << "accepted " << block.dump();
        } catch (const ApiError& e) {
            EXPECT_EQ(e.param, param) << e.what();
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    {  // A URL source becomes an image_url part with the URL (fetched only with --allow-image-urls).
        json b = body;
        b["messages"][0]["content"][0] = {{"type", "image"}, {"source", {{"type", "url"}, {"url", "https://example.com/a.png"}}}};
        const auto url_parts = image_parts(json(translate_anthropic_request(b, MessagesRoute::messages).chat_body)["messages"]);
        ASSERT_EQ(url_parts.size(), 1u);
        EXPECT_EQ(url_parts[0].url, "https://example.com/a.png");
        EXPECT_EQ(url_parts[0].url_param, "messages[0].content[0].image_url.url");
    }
    refused({{"type", "image"}, {"source", {{"type", "url"}, {"url", "ftp://example.com/a.png"}}}}, "user",
            "messages[0].content[0].image_url.url", "must be a data: URL");
    refused({{"type", "image"}, {"source", {{"type", "file"}, {"file_id", "f"}}}}, "user",
            "messages[0].content[0].source.type", "only base64");
    refused({{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}}}}, "user",
            "messages[0].content[0].source.data", "string");
    refused({{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", b64}}}},
            "assistant", "messages[1].content[0].type", "user messages");
}

struct Model {
    std::string text, mm;
    std::unique_ptr<gguf::File> file;
    std::shared_ptr<const tokenizer::Tokenizer> tok;
};

// What ImageInput checks of the text model: its width (a Gemma 3: no deep-stack, no M-RoPE).
model::StepModelInfo text_model(int64_t dim) {
    model::StepModelInfo info;
    info.config.dim = dim;
    return info;
}

const Model& model() {
    static const Model m = [] {
        Model out{test::temp_path("image-input-text.gguf"), test::temp_path("image-input-mmproj.gguf"), nullptr, nullptr};
        const auto r = test::run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4",
                                         "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        out.file = gguf::File::open(out.text);
        out.tok = tokenizer::Tokenizer::from_gguf(*out.file);
        return out;
    }();
    return m;
}

TEST(ImageInput, EncodesDataUrlsAndRefusesBadImagesByPart) {
    ImageInput input(model().mm, "cpu", 1, *model().tok, text_model(64));
    EXPECT_EQ(input.tokens_per_image(), 16);
    const vision::EncodedImage a = input.encode(data_url(9), "messages[0].content[1]");
    EXPECT_EQ(a.embeddings.size(), size_t(16 * 64));
    EXPECT_EQ(input.encode(data_url(9), "x").hash, a.hash);
    EXPECT_NE(input.encode(data_url(200), "x").hash, a.hash);

    auto refused = [&](const std::string& url, const std::string& words) {
        try {
            input.encode(url, "messages[2].content[0]");
            ADD_FAILURE() << "accepted " << url.substr(0, 40);
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_EQ(e.param, "messages[2].content[0]") << e.what();
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    std::vector<uint8_t> corrupt = png(9);
    corrupt.resize(corrupt.size() / 2);
    refused("data:image/png;base64," + pagoda::encode_base64(corrupt), "not a readable image");
    refused("data:image/gif;base64," + pagoda::encode_base64(png(9)), "unsupported image type 'image/gif'");
    refused("data:image/png;base64,@@@@", "not a readable image");
    refused("data:image/png,plain", "not a readable image");

    EXPECT_THROW(ImageInput(model().mm, "cpu", 1, *model().tok, text_model(48)), Error) << "another width than the text model's";
}

TEST(ImageInput, MarkersExpandIntoGemma3Layout) {
    ImageInput input(model().mm, "cpu", 1, *model().tok, text_model(64));
    const auto& tok = *model().tok;
    const int32_t start = tok.encode("<start_of_image>", {.add_bos = false, .add_eos = false, .parse_special = true}).at(0);
    const int32_t end = tok.encode("<end_of_image>", {.add_bos = false, .add_eos = false, .parse_special = true}).at(0);
    const int32_t soft = tok.encode("<image_soft_token>", {.add_bos = false, .add_eos = false, .parse_special = true}).at(0);
    const std::vector<int32_t> nl = tok.encode("\n\n", {.add_bos = false, .add_eos = false});
    std::vector<int32_t> prompt = {2, 30, start, 31, start, 32};
    std::vector<vision::EncodedImage> images = {input.encode(data_url(1), "a"), input.encode(data_url(2), "b")};
    const uint64_t h0 = images[0].hash, h1 = images[1].hash;
    const auto first = images[0].embeddings;
    const auto spans = input.expand(prompt, std::move(images));
    ASSERT_EQ(spans.size(), 2u);
    // 2 30 | \n\n <start> 16 x soft <end> \n\n | 31 | the same | 32
    std::vector<int32_t> want = {2, 30};
    auto image = [&] {
        want.insert(want.end(), nl.begin(), nl.end());
        want.push_back(start);
        want.insert(want.end(), 16, soft);
        want.push_back(end);
        want.insert(want.end(), nl.begin(), nl.end());
    };
    image();
    want.push_back(31);
    image();
    want.push_back(32);
    EXPECT_EQ(prompt, want);
    EXPECT_EQ(spans[0].begin, int64_t(2 + nl.size() + 1));
    EXPECT_EQ(spans[1].begin, spans[0].begin + 16 + 1 + 2 * int64_t(nl.size()) + 1 + 1);
    for (const auto& s : spans) {
        EXPECT_EQ(s.rows, 16);
        for (int64_t p = s.begin; p < s.begin + s.rows; ++p) EXPECT_EQ(prompt[size_t(p)], soft);
    }
    EXPECT_EQ(spans[0].hash, h0);
    EXPECT_EQ(spans[1].hash, h1);
    EXPECT_EQ(spans[0].embeddings, first);

    std::vector<int32_t> one = {2, start, start};
    try {
        input.expand(one, {input.encode(data_url(1), "a")});
        ADD_FAILURE() << "two markers for one image";
    } catch (const ApiError& e) {
        EXPECT_NE(std::string(e.what()).find("2 image markers"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::server
