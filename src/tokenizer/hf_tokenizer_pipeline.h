// The text pipeline of a tokenizer.json — normalizer, pre-tokenizer, post-processor, decoder — read
// into what pagoda's tokenizers can do with it, and written back from a Vocab. Steps pagoda would
// not reproduce are refused by type name; see hf_tokenizer.h for the accepted forms.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer::hf {

// What the normalizer and pre-tokenizer say, in pagoda's terms.
struct TextPipeline {
    bool byte_level = false;             // a ByteLevel pre-tokenizer step: byte-level BPE
    std::vector<std::string> patterns;   // the regex splits in order (ByteLevel's GPT-2 regex included)
    bool spm_spaces = false;             // spaces become U+2581 (Replace normalizer or Metaspace)
    bool prepend_space = false;          // a U+2581 goes before the text (Prepend / Metaspace scheme)
    bool normalized_spaces = false;      // the normalizer already replaced every " " (pre-tokenizers run after it)
    bool nfc = false;                    // an NFC normalizer step
};
TextPipeline read_text_pipeline(const Json& tokenizer_json, const JsonPath& root);

// The tokens the post-processor adds around a single sequence (TemplateProcessing), by id.
struct AddedAround {
    std::optional<int64_t> before, after;
};
AddedAround read_post_processor(const Json& tokenizer_json, const JsonPath& root);
// Refuses a decoder step pagoda's decode() does not match (WordPiece, CTC, BPEDecoder…).
void check_decoder(const Json& tokenizer_json, const JsonPath& root);

// The registry name whose regexes are exactly `patterns` (and whose ignore_merges default agrees
// when the file states one), or nullopt.
std::optional<std::string> pre_tokenizer_name_for(const std::vector<std::string>& patterns,
                                                  std::optional<bool> ignore_merges);

// The JSON Hugging Face's tokenizers writes for a vocabulary of this kind.
nlohmann::ordered_json normalizer_json(const Vocab& vocab);
nlohmann::ordered_json pre_tokenizer_json(const Vocab& vocab);
nlohmann::ordered_json post_processor_json(const Vocab& vocab);
nlohmann::ordered_json decoder_json(const Vocab& vocab);

}  // namespace pagoda::tokenizer::hf
