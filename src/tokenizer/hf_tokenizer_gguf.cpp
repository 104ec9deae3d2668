// A VocabSpec as GGUF tokenizer keys, so a Hugging Face folder can be presented as a GGUF view
// (contract in hf_tokenizer.h).
#include "tokenizer/hf_tokenizer.h"

namespace pagoda::tokenizer {

std::vector<std::pair<std::string, gguf::Value>> vocab_spec_gguf_keys(const VocabSpec& spec,
                                                                      const std::string& chat_template) {
    (void)Vocab::from_spec(spec);  // refuse what Vocab::from_gguf would refuse, before anyone writes it
    std::vector<std::pair<std::string, gguf::Value>> keys;
    auto add = [&](std::string key, gguf::Value value) { keys.emplace_back(std::move(key), std::move(value)); };
    auto i32s = [](const std::vector<int64_t>& v) {
        return gguf::Value::i32s(std::vector<int32_t>(v.begin(), v.end()));  // from_spec checked the ranges
    };
    add("tokenizer.ggml.model", gguf::Value::string(spec.model));
    if (!spec.pre.empty()) add("tokenizer.ggml.pre", gguf::Value::string(spec.pre));
    add("tokenizer.ggml.tokens", gguf::Value::strings(spec.tokens));
    if (!spec.scores.empty()) add("tokenizer.ggml.scores", gguf::Value::f32s(spec.scores));
    if (!spec.token_types.empty()) add("tokenizer.ggml.token_type", i32s(spec.token_types));
    if (!spec.merges.empty() || spec.model == "gpt2")  // from_gguf requires the key for BPE, even empty
        add("tokenizer.ggml.merges", gguf::Value::strings(spec.merges));
    for (const auto& [key, id] : {std::pair{"bos_token_id", spec.bos}, std::pair{"eos_token_id", spec.eos},
                                  std::pair{"unknown_token_id", spec.unk}, std::pair{"padding_token_id", spec.pad},
                                  std::pair{"seperator_token_id", spec.sep}, std::pair{"eot_token_id", spec.eot},
                                  std::pair{"eom_token_id", spec.eom}, std::pair{"fim_pre_token_id", spec.fim_pre},
                                  std::pair{"fim_suf_token_id", spec.fim_suf}, std::pair{"fim_mid_token_id", spec.fim_mid},
                                  std::pair{"fim_pad_token_id", spec.fim_pad}, std::pair{"fim_rep_token_id", spec.fim_rep},
                                  std::pair{"fim_sep_token_id", spec.fim_sep}})
        if (id) add(std::string("tokenizer.ggml.") + key, gguf::Value::u32(uint32_t(*id)));
    for (const auto& [key, flag] : {std::pair{"add_bos_token", spec.add_bos}, std::pair{"add_eos_token", spec.add_eos},
                                    std::pair{"add_space_prefix", spec.add_space_prefix}})
        if (flag) add(std::string("tokenizer.ggml.") + key, gguf::Value::boolean(*flag));
    if (!chat_template.empty()) add("tokenizer.chat_template", gguf::Value::string(chat_template));
    // What llama.cpp's keys cannot say (Vocab::from_gguf reads these back).
    if (!spec.pre_patterns.empty()) add("tokenizer.pagoda.pre_patterns", gguf::Value::strings(spec.pre_patterns));
    if (spec.ignore_merges) add("tokenizer.pagoda.ignore_merges", gguf::Value::boolean(*spec.ignore_merges));
    if (!spec.lstrip_ids.empty()) add("tokenizer.pagoda.lstrip_ids", i32s(spec.lstrip_ids));
    if (!spec.rstrip_ids.empty()) add("tokenizer.pagoda.rstrip_ids", i32s(spec.rstrip_ids));
    return keys;
}

}  // namespace pagoda::tokenizer
