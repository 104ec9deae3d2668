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
    // WordPiece / Unigram pipelines.
    std::optional<VocabSpec> bert;       // a BertNormalizer step: its switches (lowercase, strip_accents, ...)
    bool bert_pre_tokenizer = false;     // a BertPreTokenizer step
    std::optional<std::string> charsmap; // a Precompiled step: the decoded blob (empty: a no-op step)
    bool collapse_spaces = false;        // a Replace of the regex " {2,}" by " "
    bool metaspace = false;              // a Metaspace pre-tokenizer step
    std::string prepend_scheme;          // its scheme (always / first / never)
    bool metaspace_split = false;        // its split switch
    bool whitespace_split = false;       // a WhitespaceSplit step before it (T5's)
};
TextPipeline read_text_pipeline(const Json& tokenizer_json, const JsonPath& root);

// The tokens the post-processor adds around a single sequence, by id, and its pair template
// (TemplateProcessing, BertProcessing, RobertaProcessing).
struct AddedAround {
    std::optional<int64_t> before, after;
    std::vector<TemplatePiece> pair;  // empty when the file gives none
    std::string type;                 // the post-processor's type ("" when there is none)
};
AddedAround read_post_processor(const Json& tokenizer_json, const JsonPath& root);
// Refuses a decoder step pagoda's decode() does not match (CTC, BPEDecoder…; WordPiece only when
// `wordpiece` with the model's continuation prefix).
void check_decoder(const Json& tokenizer_json, const JsonPath& root, bool wordpiece = false,
                   const std::string& continuing_prefix = "##");

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
