// The WordPiece and Unigram halves of reading a tokenizer.json (hf_tokenizer_read.cpp does the ids,
// added tokens and special tokens; this sets the model's own fields of the spec). Internal to the
// hf_tokenizer_* files; the accepted forms are listed in hf_tokenizer.h.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/hf_tokenizer_pipeline.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer::hf {

struct EncoderModelJson {
    const Json& tokenizer_json;
    const Json& model;
    const JsonPath& model_at;
    const JsonPath& root;
    const TextPipeline& pipeline;
    bool byte_fallback;
};
using IdOf = std::function<int64_t(const std::string& text, const JsonPath& at)>;

// `type` is "WordPiece" or "Unigram"; `unigram_scores` the scores of the Unigram vocab's entries.
void read_encoder_model(const std::string& type, const EncoderModelJson& m, VocabSpec& spec, const IdOf& id_of,
                        const std::vector<float>& unigram_scores);

}  // namespace pagoda::tokenizer::hf
