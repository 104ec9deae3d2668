// Reading tokenizer.json + tokenizer_config.json into a VocabSpec (contract in hf_tokenizer.h).
#include <charconv>
#include <filesystem>
#include <map>

#include "core/json_reader.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/hf_tokenizer_encoder.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/hf_tokenizer_pipeline.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vector_file.h"

namespace pagoda::tokenizer {

namespace {

using hf::Json;
using hf::JsonPath;

struct AddedToken {
    std::string content;
    bool special = false, lstrip = false, rstrip = false;
};

// One added token object, as tokenizer.json's added_tokens and tokenizer_config.json's
// added_tokens_decoder write it.
AddedToken read_added_token(const Json& j, const JsonPath& at) {
    hf::as_object(j, at);
    AddedToken t;
    t.content = hf::as_string(hf::required(j, "content", at), at / "content");
    if (t.content.empty()) (at / "content").fail("is empty");
    t.special = hf::optional_bool(j, "special", at).value_or(false);
    t.lstrip = hf::optional_bool(j, "lstrip", at).value_or(false);
    t.rstrip = hf::optional_bool(j, "rstrip", at).value_or(false);
    if (hf::optional_bool(j, "single_word", at).value_or(false))
        (at / "single_word").fail("single_word true is not supported (pagoda matches added tokens anywhere)");
    return t;
}

void add_token(std::map<int64_t, AddedToken>& added, int64_t id, AddedToken t, const JsonPath& at) {
    auto [it, inserted] = added.emplace(id, t);
    if (!inserted && it->second.content != t.content)
        at.fail("id {} is both '{}' and '{}'", id, it->second.content, t.content);
}

bool is_byte_piece(const std::string& t) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
    return t.size() == 6 && t.starts_with("<0x") && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// One merge in either form: "left right" (older files) or ["left", "right"].
std::pair<std::string, std::string> read_merge(const Json& m, const JsonPath& at) {
    if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        size_t sep = s.find(' ');
        if (sep == std::string::npos || sep == 0 || sep + 1 >= s.size() || s.find(' ', sep + 1) != std::string::npos)
            at.fail("'{}' is not of the form \"left right\"", s);
        return {s.substr(0, sep), s.substr(sep + 1)};
    }
    if (m.is_array() && m.size() == 2)
        return {hf::as_string(m[0], at[0]), hf::as_string(m[1], at[1])};
    at.fail("must be a \"left right\" string or a [left, right] pair, got {}", json_reader::type_name(m));
}

struct Config {
    std::map<int64_t, AddedToken> added;
    std::optional<std::string> bos, eos, unk, pad, sep, cls, mask;
    std::optional<bool> add_bos, add_eos;
    std::string chat_template;
};

Config read_config(std::string_view text, const std::string& file) {
    Config c;
    if (text.empty()) return c;
    const JsonPath root{file, ""};
    const Json j = hf::parse_json(text, file);
    hf::as_object(j, root);
    if (const Json* decoder = hf::member(j, "added_tokens_decoder")) {
        const JsonPath at = root / "added_tokens_decoder";
        for (const auto& [key, value] : hf::as_object(*decoder, at).items()) {
            int64_t id = -1;
            auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
            if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= hf::kMaxTokenId)
                (at / key).fail("the key must be a token id below {}", hf::kMaxTokenId);
            add_token(c.added, id, read_added_token(value, at / key), at / key);
        }
    }
    c.bos = hf::token_text(j, "bos_token", root);
    c.eos = hf::token_text(j, "eos_token", root);
    c.unk = hf::token_text(j, "unk_token", root);
    c.pad = hf::token_text(j, "pad_token", root);
    c.sep = hf::token_text(j, "sep_token", root);
    c.cls = hf::token_text(j, "cls_token", root);
    c.mask = hf::token_text(j, "mask_token", root);
    c.add_bos = hf::optional_bool(j, "add_bos_token", root);
    c.add_eos = hf::optional_bool(j, "add_eos_token", root);
    if (const Json* t = hf::member(j, "chat_template")) {
        const JsonPath at = root / "chat_template";
        if (t->is_string()) {
            c.chat_template = t->get<std::string>();
        } else if (t->is_array()) {
            // The named-templates form: [{"name": "default", "template": …}, {"name": "tool_use", …}].
            std::vector<std::string> names;
            for (size_t i = 0; i < t->size(); ++i) {
                const Json& entry = hf::as_object((*t)[i], at[i]);
                const std::string& name = hf::as_string(hf::required(entry, "name", at[i]), at[i] / "name");
                const std::string& body = hf::as_string(hf::required(entry, "template", at[i]), at[i] / "template");
                if (name == "default") c.chat_template = body;
                names.push_back(name);
            }
            if (c.chat_template.empty() && !names.empty())
                at.fail("has no template named \"default\" (it has: {})", fmt::join(names, ", "));
        } else {
            at.fail("must be a string or a list of {{\"name\", \"template\"}} objects, got {}", json_reader::type_name(*t));
        }
    }
    return c;
}

HfTokenizer parse(std::string_view tokenizer_json, std::string_view config_json, const std::string& name) {
    const std::string file = name + "/tokenizer.json";
    const JsonPath root{file, ""};
    const Json tj = hf::parse_json(tokenizer_json, file);
    hf::as_object(tj, root);
    Config config = read_config(config_json, name + "/tokenizer_config.json");
    const JsonPath cfg_root{name + "/tokenizer_config.json", ""};

    const JsonPath model_at = root / "model";
    const Json& model = hf::as_object(hf::required(tj, "model", root), model_at);
    std::string type;
    if (hf::member(model, "type"))
        type = hf::type_of(model, model_at);
    else if (hf::member(model, "merges"))
        type = "BPE";  // files from before the model carried its type
    else
        (model_at / "type").fail("is missing");
    if (type != "BPE" && type != "WordPiece" && type != "Unigram")
        (model_at / "type").fail("'{}' is not supported (pagoda supports BPE, WordPiece and Unigram)", type);
    const bool bpe = type == "BPE", wordpiece = type == "WordPiece", unigram = type == "Unigram";
    if (bpe) {
        if (const Json* d = hf::member(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0.0))
            (model_at / "dropout").fail("BPE dropout is not supported (it makes tokenization random)");
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (auto v = hf::optional_string(model, key, model_at); v && !v->empty())
                (model_at / key).fail("'{}' is not supported (pagoda's BPE has no word prefixes or suffixes)", *v);
    }
    const bool byte_fallback = hf::optional_bool(model, "byte_fallback", model_at).value_or(false);
    const std::optional<bool> ignore_merges = hf::optional_bool(model, "ignore_merges", model_at);

    // Ids: the model's vocab, then added tokens (which may extend it or restate its entries).
    std::vector<std::optional<std::string>> texts;
    // An added token may restate a vocab entry (Llama 2 lists <unk> <s> </s> in both), not replace one.
    auto place = [&](int64_t id, const std::string& text, const JsonPath& at) {
        if (size_t(id) >= texts.size()) {
            // Ids must be (nearly) dense: a stray huge id must not make us allocate for it.
            if (size_t(id) > 2 * texts.size() + 4096 && size_t(id) > tokenizer_json.size())
                at.fail("token id {} is out of range (far beyond the other ids)", id);
            texts.resize(size_t(id) + 1);
        }
        if (texts[id] && *texts[id] != text) at.fail("id {} is given to both '{}' and '{}'", id, *texts[id], text);
        texts[id] = text;
    };
    const JsonPath vocab_at = model_at / "vocab";
    const Json& vocab = hf::required(model, "vocab", model_at);
    std::vector<float> unigram_scores;
    if (unigram) {
        // [[piece, score], ...]: the id is the position.
        for (size_t i = 0; i < hf::as_array(vocab, vocab_at).size(); ++i) {
            const Json& entry = hf::as_array(vocab[i], vocab_at[i]);
            if (entry.size() != 2 || !entry[1].is_number()) vocab_at[i].fail("must be a [piece, score] pair");
            place(int64_t(i), hf::as_string(entry[0], vocab_at[i][0]), vocab_at[i]);
            unigram_scores.push_back(entry[1].get<float>());
        }
    } else {
        if (vocab.is_array())
            vocab_at.fail("is a list of [piece, score] pairs, the Unigram form; model.type {} needs a {{piece: id}} object", type);
        for (const auto& [text, id] : hf::as_object(vocab, vocab_at).items())
            place(hf::as_token_id(id, vocab_at / text), text, vocab_at / text);
    }
    std::map<int64_t, AddedToken> added;
    if (const Json* list = hf::member(tj, "added_tokens")) {
        const JsonPath at = root / "added_tokens";
        for (size_t i = 0; i < hf::as_array(*list, at).size(); ++i) {
            const Json& entry = (*list)[i];
            int64_t id = hf::as_token_id(hf::required(hf::as_object(entry, at[i]), "id", at[i]), at[i] / "id");
            add_token(added, id, read_added_token(entry, at[i]), at[i]);
        }
    }
    for (const auto& [id, t] : config.added) add_token(added, id, t, cfg_root / "added_tokens_decoder" / std::to_string(id));
    for (const auto& [id, t] : added) place(id, t.content, root / "added_tokens");
    if (texts.empty()) vocab_at.fail("is empty");

    VocabSpec spec;
    const size_t n = texts.size();
    spec.tokens.resize(n);
    spec.token_types.assign(n, int64_t(TokenType::normal));
    for (size_t id = 0; id < n; ++id) {
        if (texts[id]) {
            spec.tokens[id] = *texts[id];
        } else {  // a gap in the ids: a token no text maps to, as llama.cpp's converter pads
            spec.tokens[id] = fmt::format("[PAD{}]", id);
            spec.token_types[id] = int64_t(TokenType::unused);
        }
    }
    TokenMap ids;
    for (size_t id = 0; id < n; ++id) ids[spec.tokens[id]] = int32_t(id);
    for (const auto& [id, t] : added) ids[t.content] = int32_t(id);  // added tokens win, as in tokenizers
    auto id_of = [&](const std::string& text, const JsonPath& at) -> int64_t {
        auto it = ids.find(text);
        if (it == ids.end()) at.fail("'{}' is not a token of {}", text, file);
        return it->second;
    };

    const hf::TextPipeline pipeline = hf::read_text_pipeline(tj, root);
    const hf::AddedAround around = hf::read_post_processor(tj, root);
    if (!bpe) {
        hf::read_encoder_model(type, {tj, model, model_at, root, pipeline, byte_fallback}, spec, id_of, unigram_scores);
    } else {
        hf::check_decoder(tj, root);
        if (pipeline.bert || pipeline.bert_pre_tokenizer || pipeline.charsmap || pipeline.collapse_spaces ||
            pipeline.whitespace_split)
            root.fail("a BERT or Unigram text step (BertNormalizer, BertPreTokenizer, Precompiled, Replace of \" {{2,}}\", "
                      "WhitespaceSplit) "
                      "with a BPE model is not supported");
    }
    const bool spm = bpe && !pipeline.byte_level && (byte_fallback || pipeline.spm_spaces);
    if (bpe && !pipeline.byte_level && !spm)
        root.fail("a BPE model without a ByteLevel pre-tokenizer or SentencePiece's \u2581 spaces is not supported");
    if (spm && !pipeline.spm_spaces)
        root.fail("a byte_fallback BPE model needs spaces turned into \u2581 (a Replace normalizer or a Metaspace pre-tokenizer)");

    // Merges: every piece and every result must be a token (tokenizers refuses such files too).
    const JsonPath merges_at = model_at / "merges";
    static const Json kNoMerges = Json::array();
    const Json& merges = bpe ? hf::as_array(hf::required(model, "merges", model_at), merges_at) : kNoMerges;
    std::vector<float> scores;
    if (spm) scores.assign(n, -float(merges.size() + 1));  // tokens no merge makes: merged last
    if (!spm) spec.merges.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
        auto [left, right] = read_merge(merges[r], merges_at[r]);
        id_of(left, merges_at[r]);
        id_of(right, merges_at[r]);
        const int64_t result = id_of(left + right, merges_at[r]);
        if (spm) {
            // The first (highest-priority) merge that makes a token sets its score: merging the
            // best-scoring pair first is then merging in the file's order.
            if (scores[result] == -float(merges.size() + 1)) scores[result] = -float(r);
        } else {
            if (left.find(' ', 1) != std::string::npos)
                merges_at[r].fail("the left piece '{}' holds a space, which pagoda's merge table cannot keep apart", left);
            spec.merges.push_back(left + " " + right);
        }
    }
    if (spm) spec.scores = std::move(scores);

    if (bpe) spec.model = spm ? "llama" : "gpt2";
    spec.nfc = pipeline.nfc;
    if (!bpe) {
        // read_encoder_model has set the model's own fields.
    } else if (!spm) {
        if (auto name_of = hf::pre_tokenizer_name_for(pipeline.patterns, ignore_merges)) {
            spec.pre = *name_of;
        } else {
            spec.pre = "hf-regex";
            spec.pre_patterns = pipeline.patterns;
            if (spec.pre_patterns.empty()) spec.pre_patterns.push_back(R"([\s\S]+)");  // ByteLevel without a split
        }
        spec.ignore_merges = ignore_merges.value_or(false);
    } else {
        spec.add_space_prefix = pipeline.prepend_space;
    }
    if (spm || unigram) {
        if (byte_fallback)
            for (size_t id = 0; id < n; ++id)
                if (texts[id] && is_byte_piece(spec.tokens[id])) spec.token_types[id] = int64_t(TokenType::byte);
    }
    for (const auto& [id, t] : added) {
        spec.token_types[id] = int64_t(t.special ? TokenType::control : TokenType::user_defined);
        if (t.lstrip) spec.lstrip_ids.push_back(id);
        if (t.rstrip) spec.rstrip_ids.push_back(id);
    }
    if (auto unk = hf::optional_string(model, "unk_token", model_at)) {
        spec.unk = id_of(*unk, model_at / "unk_token");
        spec.token_types[*spec.unk] = int64_t(TokenType::unknown);
    }
    if (unigram) {
        if (const Json* unk_id = hf::member(model, "unk_id")) {
            spec.unk = hf::as_token_id(*unk_id, model_at / "unk_id");
            if (size_t(*spec.unk) >= n) (model_at / "unk_id").fail("{} is not a token id (the vocabulary has {})", *spec.unk, n);
            if (spec.token_types[*spec.unk] == int64_t(TokenType::normal))
                spec.token_types[*spec.unk] = int64_t(TokenType::unknown);
        }
    }

    // Special ids and BOS/EOS: tokenizer_config.json wins over the post-processor, as transformers
    // rebuilds the post-processor from add_bos_token / add_eos_token.
    auto config_id = [&](const std::optional<std::string>& text, const char* key) -> std::optional<int64_t> {
        if (!text) return std::nullopt;
        return id_of(*text, cfg_root / key);
    };
    spec.bos = config_id(config.bos, "bos_token");
    spec.eos = config_id(config.eos, "eos_token");
    if (auto u = config_id(config.unk, "unk_token"); u && !spec.unk) spec.unk = u;
    spec.pad = config_id(config.pad, "pad_token");
    spec.sep = config_id(config.sep, "sep_token");
    spec.cls = config_id(config.cls, "cls_token");
    spec.mask = config_id(config.mask, "mask_token");
    if (!spec.bos && around.before) spec.bos = around.before;
    if (wordpiece) {
        // BERT ends a text with its separator, not an EOS: [CLS] text [SEP].
        if (!spec.sep && around.after) spec.sep = around.after;
        spec.add_sep = around.after.has_value();
        if (!spec.cls && around.before) spec.cls = around.before;
        spec.add_eos = config.add_eos.value_or(false);
    } else {
        if (!spec.eos && around.after) spec.eos = around.after;
        spec.add_eos = config.add_eos.value_or(around.after.has_value());
    }
    spec.add_bos = config.add_bos.value_or(around.before.has_value());
    spec.pair_template = around.pair;
    if (*spec.add_bos && !spec.bos) cfg_root.fail("add_bos_token is true but no BOS token is named (bos_token)");
    if (*spec.add_eos && !spec.eos) cfg_root.fail("add_eos_token is true but no EOS token is named (eos_token)");
    // A token the files do not name does not exist: llama.cpp's per-kind default ids (BPE's 11,
    // SentencePiece's 1/2/0) describe GGUF conversions, not these files.
    for (std::optional<int64_t>* id : {&spec.bos, &spec.eos, &spec.unk, &spec.sep, &spec.cls, &spec.pad, &spec.mask})
        if (!*id) *id = -1;

    // What Vocab and the pre-tokenizer would refuse, refused here with the file's name.
    try {
        Vocab v = Vocab::from_spec(spec);
        if (v.type() == VocabType::bpe) PreTokenizer check(v.pre(), v.pre_patterns());
    } catch (const Error& e) {
        fail("{}: {}", file, e.what());
    }
    return {std::move(spec), std::move(config.chat_template)};
}

}  // namespace

HfTokenizer parse_hf_tokenizer(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               const std::string& name_for_errors) {
    try {
        return parse(tokenizer_json, tokenizer_config_json, name_for_errors);
    } catch (const nlohmann::json::exception& e) {  // a shape the checks above did not foresee
        fail("{}: malformed tokenizer files: {}", name_for_errors, e.what());
    }
}

HfTokenizer read_hf_tokenizer(const std::string& dir) {
    namespace fs = std::filesystem;
    const fs::path base(dir);
    if (!fs::exists(base / "tokenizer.json"))
        fail("{}: no tokenizer.json (pagoda reads Hugging Face's fast-tokenizer file)", dir);
    const std::string tokenizer_json = read_text_file((base / "tokenizer.json").string());
    std::string config;
    if (fs::exists(base / "tokenizer_config.json")) config = read_text_file((base / "tokenizer_config.json").string());
    HfTokenizer out = parse_hf_tokenizer(tokenizer_json, config, dir);
    if (out.chat_template.empty() && fs::exists(base / "chat_template.jinja")) {
        out.chat_template = read_text_file((base / "chat_template.jinja").string());
    } else if (out.chat_template.empty() && fs::exists(base / "chat_template.json")) {
        // The processor-era form: {"chat_template": "…"}.
        const std::string file = (base / "chat_template.json").string();
        const hf::JsonPath root{file, ""};
        const hf::Json j = hf::parse_json(read_text_file(file), file);
        out.chat_template = hf::as_string(hf::required(j, "chat_template", root), root / "chat_template");
    }
    return out;
}

}  // namespace pagoda::tokenizer
