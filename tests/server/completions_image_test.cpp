// Images on /v1/completions, as llama-server takes them: the prompt as an object
// {"prompt_string": "... <__media__> ...", "multimodal_data": ["<base64>", ...]}. The parser keeps
// the base64 items and refuses by name what is not served; the tokenizer turns each media marker
// into Gemma 3's image marker with the text around it encoded as any completions prompt (no
// special-token parsing, BOS first), ready for ImageInput::expand.
#include <algorithm>
#include <gtest/gtest.h>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/image_parts.h"
#include "server/openai_engine_request.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

ApiError refusal(const json& body) {
    try {
        parse_completion_request(body, Endpoint::completions);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "accepted", "");
}

TEST(CompletionsImages, PromptObjectKeepsItsImagesInOrder) {
    const CompletionParams p = parse_completion_request(
        json{{"prompt", {{"prompt_string", "a <__media__> b <__media__>"}, {"multimodal_data", {"AAAA", "BBBB"}}}}},
        Endpoint::completions);
    ASSERT_EQ(p.prompts.size(), 1u);
    EXPECT_EQ(std::get<std::string>(p.prompts[0]), "a <__media__> b <__media__>");
    EXPECT_EQ(p.multimodal_data, (std::vector<std::string>{"AAAA", "BBBB"}));
    // Without images the object is a text prompt.
    const CompletionParams text =
        parse_completion_request(json{{"prompt", {{"prompt_string", "plain"}}}}, Endpoint::completions);
    EXPECT_EQ(std::get<std::string>(text.prompts.at(0)), "plain");
    EXPECT_TRUE(text.multimodal_data.empty());
    EXPECT_EQ(count_media_markers("<__media__><__media__>x<__media_"), 2u);
}

TEST(CompletionsImages, WhatIsNotServedIsRefusedByName) {
    auto refused = [](const json& body, const std::string& param, const std::string& words) {
        const ApiError e = refusal(body);
        EXPECT_EQ(e.status, 400) << body.dump();
        EXPECT_EQ(e.param, param) << e.what();
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    };
    refused(json{{"prompt", {{"prompt_string", "a <__media__>"}, {"multimodal_data", {"AAAA", "BBBB"}}}}},
            "prompt.multimodal_data", "holds 1 media markers (<__media__>) for 2 items");
    refused(json{{"prompt", {{"prompt_string", "a <__media__>"}}}}, "prompt.multimodal_data",
            "holds 1 media markers (<__media__>) for 0 items");
    refused(json{{"prompt", {{"prompt_string", "a"}, {"images", json::array()}}}}, "prompt.images",
            "not a field of a prompt object");
    refused(json{{"prompt", {{"multimodal_data", {"AAAA"}}}}}, "prompt.prompt_string", "required");
    refused(json{{"prompt", {{"prompt_string", "<__media__>"}, {"multimodal_data", {1}}}}},
            "prompt.multimodal_data[0]", "string");
    refused(json{{"prompt", {{"prompt_string", "<__media__>"}, {"multimodal_data", "AAAA"}}}},
            "prompt.multimodal_data", "array");
    refused(json{{"prompt", json::array({"x", {{"prompt_string", "y"}}})}}, "prompt[1]",
            "served as the request's only prompt");
    refused(json{{"prompt", {{"prompt_string", "<__media__>"}, {"multimodal_data", {"AAAA"}}}}, {"suffix", "end"}},
            "suffix", "fill in the middle");
}

TEST(CompletionsImages, MediaMarkersBecomeTheImageMarkerBetweenPlainTextPieces) {
    // A projector beside it gives the vocabulary Gemma 3's image tokens.
    const std::string path = test::temp_path("completions-image-gemma3.gguf");
    const auto r = test::run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "1", "--dim", "64", "--heads", "4",
                                     "--kv-heads", "2", "-o", path, "--mmproj",
                                     test::temp_path("completions-image-mmproj.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto tok = tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
    const CompletionParams p = parse_completion_request(
        json{{"prompt", {{"prompt_string", "Look <__media__> and <start_of_image> too<__media__>"},
                         {"multimodal_data", {"AAAA", "BBBB"}}}}},
        Endpoint::completions);
    const TokenizedPrompts t = tokenize_prompts(p, *tok, nullptr, tok->n_vocab());
    ASSERT_EQ(t.prompts.size(), 1u);
    const auto marker_ids = tok->encode(kImageMarker, {.add_bos = false, .add_eos = false, .parse_special = true});
    ASSERT_EQ(marker_ids.size(), 1u);
    const int32_t marker = marker_ids[0];
    std::vector<int32_t> want = tok->encode("Look ", {.add_eos = false});
    want.push_back(marker);
    const auto middle = tok->encode(" and <start_of_image> too", {.add_bos = false, .add_eos = false});
    want.insert(want.end(), middle.begin(), middle.end());
    want.push_back(marker);
    EXPECT_EQ(t.prompts[0], want);
    EXPECT_EQ(std::count(t.prompts[0].begin(), t.prompts[0].end(), marker), 2)
        << "text that spells the image marker stays text, as in any completions prompt";
}

}  // namespace
}  // namespace pagoda::server
