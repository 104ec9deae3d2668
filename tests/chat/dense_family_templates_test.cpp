// The chat templates of the dense families pagoda now runs — Gemma 2 and 3, Phi-3, Llama 3 — end to
// end: rendered by pagoda's Jinja engine from the builtin (published) templates, with their special
// tokens in place, and (Phi-3, whose vocabulary is a fixture) encoded to the special token ids.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using chat::ChatTemplate;

TEST(DenseFamilyTemplates, GemmaTurnsAndSystemPrompt) {
    // Gemma 3 joins a system message to the first user turn; Gemma 2's template refuses one.
    EXPECT_EQ(ChatTemplate::builtin("gemma3").render({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."},
                                                      {"user", "Bye"}}, true, "<bos>", "<eos>"),
              "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
              "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
    EXPECT_EQ(ChatTemplate::builtin("gemma").render({{"user", "Hi"}}, true, "<bos>", "<eos>"),
              "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
    EXPECT_THROW(ChatTemplate::builtin("gemma").render({{"system", "x"}, {"user", "Hi"}}, true, "<bos>", "<eos>"), Error);
}

TEST(DenseFamilyTemplates, Llama3Headers) {
    EXPECT_EQ(ChatTemplate::builtin("llama3").render({{"system", "Be brief."}, {"user", "Hi"}}, true, "<|begin_of_text|>",
                                                     "<|eot_id|>"),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(DenseFamilyTemplates, Phi3PromptEncodesToItsSpecialTokens) {
    const std::string path = fixture("vocab/ggml-vocab-phi-3.gguf");
    PAGODA_REQUIRE_FIXTURE(path);
    auto tok = tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
    const std::string prompt = ChatTemplate::builtin("phi3").render(
        {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}, true, "<s>", "<|endoftext|>");
    EXPECT_EQ(prompt, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n<|user|>\nBye<|end|>\n"
                      "<|assistant|>\n");
    const auto ids = tok->encode(prompt, {.add_bos = true, .parse_special = true});
    std::vector<int32_t> specials;
    for (int32_t id : ids)
        if (id == 1 || id >= 32000) specials.push_back(id);
    // <s>, <|system|> 32006, <|end|> 32007, <|user|> 32010, <|assistant|> 32001, as Phi-3's vocabulary numbers them.
    EXPECT_EQ(specials, (std::vector<int32_t>{1, 32006, 32007, 32010, 32007, 32001, 32007, 32010, 32007, 32001}));
    EXPECT_EQ(ids.back(), 32001) << "the special token eats the newline after it";
    EXPECT_TRUE(tok->is_eog(32007)) << "<|end|> ends the assistant's turn";
}

}  // namespace
}  // namespace pagoda::test
