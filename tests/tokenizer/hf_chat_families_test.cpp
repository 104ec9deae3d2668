// Issue 15 item 5: the chat templates of the families pagoda runs — Llama 3.1, Qwen 3, Mistral,
// Phi-3, Gemma 3 — taken from each folder's tokenizer_config.json, rendered, and tokenised the way
// the model expects (special-token text parsed, no BOS added: the template writes it), with the
// special tokens as single ids. The folders (tests/data/hf_tokenizer, made by make_files.py) hold
// the family's published template and a tiny vocabulary laid out so every id below can be read off:
// byte-level ones have id = byte for the 256 byte tokens, then word prefixes (user 258, assistant
// 266, system 271, model 275, Hi 276, Hello 280, Bye 282, "\n\n" 283), then the specials; the
// SentencePiece ones have <unk> <s> </s>, <0xXX> = 3 + byte, the characters (\n 259 … ▁ 275), the
// prefixes (user 278, model 295, Hi 296, Hello 300, Bye 302, ▁Hi 328, ▁Hello 332, ▁Bye 335), then
// the specials from 337.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using Ids = std::vector<int32_t>;

struct Rendered {
    std::string prompt;
    Ids ids;
    std::unique_ptr<tokenizer::Tokenizer> tok;
};

Rendered render(const std::string& folder, const std::vector<chat::ChatMessage>& messages) {
    const tokenizer::HfTokenizer hf = tokenizer::read_hf_tokenizer(source_dir() + "/tests/data/hf_tokenizer/" + folder);
    Rendered r;
    r.tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    const auto& v = r.tok->vocab();
    const std::string bos = v.bos() == tokenizer::kNoToken ? "" : v.text(v.bos());
    const std::string eos = v.eos() == tokenizer::kNoToken ? "" : v.text(v.eos());
    r.prompt = chat::ChatTemplate::from_source(hf.chat_template, folder).render(messages, true, bos, eos);
    r.ids = r.tok->encode(r.prompt, {.add_bos = false, .add_eos = false, .parse_special = true});
    return r;
}

const std::vector<chat::ChatMessage> kTurns = {{"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};

Ids bytes(std::string_view s) { return Ids(s.begin(), s.end()); }  // byte-level ids of unmerged text

Ids cat(std::initializer_list<Ids> parts) {
    Ids out;
    for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

TEST(HfChatFamilies, Llama31) {
    Rendered r = render("llama3.1", kTurns);
    const std::string system = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024";
    EXPECT_EQ(r.prompt, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" + system +
                            "\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n");
    // <|begin_of_text|> 284, <|start_header_id|> 286, <|end_header_id|> 287, <|eot_id|> 289; no merge
    // fires inside the system text, so it is its bytes.
    EXPECT_EQ(r.ids, cat({{284, 286, 271, 287, 283}, bytes(system),
                          {283, 289, 286, 258, 287, 283, 276, 289, 286, 266, 287, 283, 280, '.', 289, 286, 258, 287, 283,
                           282, 289, 286, 266, 287, 283}}));
    EXPECT_TRUE(r.tok->is_eog(289) && r.tok->is_eog(288)) << "<|eot_id|> and <|eom_id|> end a turn";
}

TEST(HfChatFamilies, Qwen3) {
    Rendered r = render("qwen3", kTurns);
    EXPECT_EQ(r.prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                        "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    // <|im_start|> 285, <|im_end|> 286.
    EXPECT_EQ(r.ids, (Ids{285, 258, '\n', 276, 286, '\n', 285, 266, '\n', 280, '.', 286, '\n', 285, 258, '\n', 282, 286,
                          '\n', 285, 266, '\n'}));
    EXPECT_TRUE(r.tok->is_eog(286));
}

TEST(HfChatFamilies, Mistral) {
    Rendered r = render("mistral", kTurns);
    EXPECT_EQ(r.prompt, "<s>[INST] Hi[/INST] Hello.</s>[INST] Bye[/INST]");
    // <s> 1, [INST] 337, [/INST] 338, </s> 2; the dummy prefix after each special token makes the
    // template's own space a lone ▁ (275) before ▁Hi, as llama.cpp and the legacy tokenizer give.
    EXPECT_EQ(r.ids, (Ids{1, 337, 275, 328, 338, 275, 332, 3 + '.', 2, 337, 275, 335, 338}));
}

TEST(HfChatFamilies, Phi3) {
    Rendered r = render("phi3", kTurns);
    EXPECT_EQ(r.prompt, "<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n");
    // <|user|> 341, <|end|> 339, <|assistant|> 338: each eats the newline after it (rstrip).
    EXPECT_EQ(r.ids, (Ids{341, 328, 339, 338, 332, 3 + '.', 339, 341, 335, 339, 338}));
}

TEST(HfChatFamilies, Gemma3) {
    Rendered r = render("gemma3", {{"system", "Hi"}, {"user", "Bye"}, {"assistant", "Hello."}, {"user", "Hi"}});
    EXPECT_EQ(r.prompt, "<bos><start_of_turn>user\nHi\n\nBye<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
                        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
    // <bos> 337, <start_of_turn> 340, <end_of_turn> 341; no dummy prefix (Gemma), "\n" 259, "\n\n" 336.
    EXPECT_EQ(r.ids, (Ids{337, 340, 278, 259, 296, 336, 302, 341, 259, 340, 295, 259, 300, 3 + '.', 341, 259, 340, 278,
                          259, 296, 341, 259, 340, 295, 259}));
    EXPECT_TRUE(r.tok->is_eog(341)) << "<end_of_turn> ends the model's turn";
}

}  // namespace
}  // namespace pagoda::test
