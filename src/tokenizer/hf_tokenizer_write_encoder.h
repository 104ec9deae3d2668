// tokenizer.json parts for WordPiece and Unigram vocabularies (hf_tokenizer_write.cpp writes the rest).
// A WordPiece vocabulary in llama.cpp's spelling (U+2581 word starts) is written in Hugging Face's
// ("x" word starts, "##x" continuations). GGUF-only Unigram settings map to their closest steps:
// remove_extra_whitespaces to a WhitespaceSplit before Metaspace, SentencePiece's dummy prefix to
// Metaspace's "always" (which does not double a U+2581 before text that starts with a space),
// SentencePiece's longest-match charsmap to Precompiled (per grapheme cluster: charsmap.h).
// Internal to the hf_tokenizer_* files.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer::hf {

// Each token's text as tokenizer.json spells it (only WordPiece pieces change).
std::vector<std::string> hf_token_texts(const Vocab& vocab);
// The "model" object; `texts` from hf_token_texts, `vocab_object` the {text: id} map the caller built.
nlohmann::ordered_json encoder_model_json(const Vocab& vocab, const std::vector<std::string>& texts,
                                          nlohmann::ordered_json vocab_object);
nlohmann::ordered_json encoder_normalizer_json(const Vocab& vocab);
nlohmann::ordered_json encoder_pre_tokenizer_json(const Vocab& vocab);
nlohmann::ordered_json encoder_post_processor_json(const Vocab& vocab, const std::vector<std::string>& texts);
nlohmann::ordered_json encoder_decoder_json(const Vocab& vocab);

}  // namespace pagoda::tokenizer::hf
