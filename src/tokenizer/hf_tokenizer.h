// Hugging Face tokenizer files (tokenizer.json + tokenizer_config.json) <-> pagoda's VocabSpec.
//
// Read: the forms the current model families ship — byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek,
// Falcon: a ByteLevel pre-tokenizer, alone or after Split regexes) becomes a "gpt2" spec whose
// pre-tokenizer is the registry name with the same regexes, or the file's own regexes when none
// matches; SentencePiece-as-BPE (Llama 2, Mistral, Gemma, Phi-3: byte_fallback, "▁" for spaces from a
// Replace normalizer or a Metaspace pre-tokenizer) becomes a "llama" spec whose scores are the
// negated merge ranks, so pagoda's score-ordered merging replays the file's merge order; WordPiece
// (BERT: BertNormalizer, BertPreTokenizer, Bert/Template post-processor, WordPiece decoder) becomes a
// "bert" spec; Unigram (XLM-R, T5: Precompiled charsmap, Replace of " {2,}", WhitespaceSplit,
// Metaspace, Roberta/Template post-processor, Metaspace decoder) a "t5" spec. WordLevel and any
// normalizer, pre-tokenizer, post-processor or decoder step pagoda would not reproduce are refused by
// name. The WordPiece decoder's cleanup (" ." -> ".", " do not" -> " don't") is not applied: decode()
// keeps the spaces between words, so decoding stays lossless. Every error is a pagoda::Error naming
// the file and the key.
// An NFC normalizer is applied (unicode_nfc.h) to the text between added tokens, as transformers
// does; a GGUF has no key for it, so a file converted to GGUF loses it (as with llama.cpp's
// converter). Known gap, accepted because llama.cpp runs these files the same way: a
// multi-character SentencePiece token that no merge produces is given the lowest score rather than
// being unreachable.
//
// Write: the same forms from a spec (e.g. one read from a GGUF; WordPiece and Unigram as
// hf_tokenizer_write_encoder.h says): SentencePiece vocabularies get BPE
// merges derived from their scores the way transformers' converter derives them (every split of a
// piece into two pieces, highest score first), byte-level ones their merges and their regexes as
// Split steps before a ByteLevel step (GPT-2's regex alone as ByteLevel with use_regex).
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

struct HfTokenizer {
    VocabSpec spec;
    std::string chat_template;  // empty when the files have none
};

// Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json; the chat template comes from
// tokenizer_config.json, else DIR/chat_template.jinja (newer transformers save it there), else
// DIR/chat_template.json.
HfTokenizer read_hf_tokenizer(const std::string& dir);
// The same from the files' texts; `tokenizer_config_json` may be empty. Errors start with
// `name_for_errors`. The returned spec is accepted by Vocab::from_spec (checked before returning).
HfTokenizer parse_hf_tokenizer(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               const std::string& name_for_errors);

// The two files' texts for a spec (what write_hf_tokenizer writes). Throws pagoda::Error when the spec
// is invalid or holds something tokenizer.json cannot (a token that is not valid UTF-8).
struct HfTokenizerFiles {
    std::string tokenizer_json;
    std::string tokenizer_config_json;
};
HfTokenizerFiles render_hf_tokenizer(const VocabSpec& spec, const std::string& chat_template);
// Writes DIR/tokenizer.json and DIR/tokenizer_config.json, creating DIR when it is missing.
void write_hf_tokenizer(const std::string& dir, const VocabSpec& spec, const std::string& chat_template);

// The tokenizer.ggml.* keys (and tokenizer.chat_template when non-empty) Vocab::from_gguf reads back
// as the same vocabulary; what GGUF has no key for goes into tokenizer.pagoda.* keys.
std::vector<std::pair<std::string, gguf::Value>> vocab_spec_gguf_keys(const VocabSpec& spec,
                                                                      const std::string& chat_template);

}  // namespace pagoda::tokenizer
