#include "tokenizer/hf_tokenizer_pipeline.h"

#include "tokenizer/pretokenizer.h"

namespace pagoda::tokenizer::hf {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581
// Hugging Face's Punctuation step: ASCII punctuation (some of it is Unicode Symbol, not Punctuation)
// or any Unicode punctuation character — the same class as the "falcon" registry entry.
constexpr std::string_view kPunctuationClass = R"([\p{P}\$\+<=>\^~\|`])";

const std::string& gpt2_regex() { return find_pre_tokenizer("gpt-2")->patterns.at(0); }

// A literal string as a PCRE2 pattern.
std::string escape_regex(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (std::string_view(R"(\^$.|?*+()[]{}/-#)").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

std::string replace_pattern(const Json& pattern, const JsonPath& at, bool* is_literal) {
    as_object(pattern, at);
    if (const Json* s = member(pattern, "String")) {
        *is_literal = true;
        return as_string(*s, at / "String");
    }
    if (const Json* r = member(pattern, "Regex")) {
        *is_literal = false;
        return as_string(*r, at / "Regex");
    }
    at.fail("must hold \"String\" or \"Regex\"");
}

void read_normalizer(const Json& n, const JsonPath& at, TextPipeline& out) {
    const std::string& type = type_of(n, at);
    if (type == "Sequence") {
        const Json& steps = as_array(required(n, "normalizers", at), at / "normalizers");
        for (size_t i = 0; i < steps.size(); ++i) read_normalizer(steps[i], (at / "normalizers")[i], out);
    } else if (type == "Prepend") {
        const std::string& p = as_string(required(n, "prepend", at), at / "prepend");
        if (p != kSpmSpace) (at / "prepend").fail("Prepend of '{}' is not supported (only \"\u2581\")", p);
        out.prepend_space = true;
    } else if (type == "Replace") {
        bool literal = false;
        std::string from = replace_pattern(required(n, "pattern", at), at / "pattern", &literal);
        const std::string& to = as_string(required(n, "content", at), at / "content");
        if (!literal && from == " {2,}" && to == " ") {  // XLM-R's: runs of spaces become one
            out.collapse_spaces = true;
            return;
        }
        if (!literal || from != " " || to != kSpmSpace)
            at.fail("a Replace of '{}' by '{}' is not supported (only \" \" by \"\u2581\", SentencePiece's space)", from, to);
        out.spm_spaces = out.normalized_spaces = true;
    } else if (type == "NFC") {
        out.nfc = true;  // unicode_nfc.h
    } else if (type == "BertNormalizer") {
        VocabSpec bert;
        bert.clean_text = optional_bool(n, "clean_text", at).value_or(true);
        bert.handle_chinese_chars = optional_bool(n, "handle_chinese_chars", at).value_or(true);
        bert.lowercase = optional_bool(n, "lowercase", at).value_or(true);
        bert.strip_accents = optional_bool(n, "strip_accents", at);  // null: follow lowercase
        out.bert = std::move(bert);
    } else if (type == "Precompiled") {
        const Json* blob = member(n, "precompiled_charsmap");
        out.charsmap = blob ? decode_base64(as_string(*blob, at / "precompiled_charsmap"), at / "precompiled_charsmap")
                            : std::string();
    } else {
        (at / "type").fail("normalizer type '{}' is not supported (pagoda supports Sequence, Prepend, Replace, NFC, "
                           "BertNormalizer and Precompiled)",
                           type);
    }
}

void read_pre_tokenizer(const Json& p, const JsonPath& at, TextPipeline& out) {
    const std::string& type = type_of(p, at);
    if (type == "Sequence") {
        const Json& steps = as_array(required(p, "pretokenizers", at), at / "pretokenizers");
        for (size_t i = 0; i < steps.size(); ++i) read_pre_tokenizer(steps[i], (at / "pretokenizers")[i], out);
    } else if (type == "ByteLevel") {
        // Hugging Face's defaults when a key is absent: add_prefix_space true, use_regex true.
        if (optional_bool(p, "add_prefix_space", at).value_or(true))
            (at / "add_prefix_space").fail("ByteLevel with add_prefix_space true is not supported");
        if (optional_bool(p, "use_regex", at).value_or(true)) out.patterns.push_back(gpt2_regex());
        out.byte_level = true;
    } else if (type == "Split") {
        bool literal = false;
        std::string pattern = replace_pattern(required(p, "pattern", at), at / "pattern", &literal);
        const std::string& behavior = as_string(required(p, "behavior", at), at / "behavior");
        if (literal && pattern == " " && out.normalized_spaces) {
            // Gemma's split at spaces: its normalizer has already made every space a U+2581.
            return;
        }
        if (behavior != "Isolated")
            (at / "behavior").fail("Split behavior '{}' is not supported (only Isolated, which keeps every byte)", behavior);
        if (optional_bool(p, "invert", at).value_or(false)) (at / "invert").fail("Split with invert true is not supported");
        out.patterns.push_back(literal ? escape_regex(pattern) : pattern);
    } else if (type == "Digits") {
        out.patterns.push_back(optional_bool(p, "individual_digits", at).value_or(false) ? R"(\p{N})" : R"(\p{N}+)");
    } else if (type == "Punctuation") {
        std::string behavior = optional_string(p, "behavior", at).value_or("Isolated");
        if (behavior == "Isolated")
            out.patterns.emplace_back(kPunctuationClass);
        else if (behavior == "Contiguous")
            out.patterns.push_back(std::string(kPunctuationClass) + "+");
        else
            (at / "behavior").fail("Punctuation behavior '{}' is not supported (only Isolated and Contiguous)", behavior);
    } else if (type == "Metaspace") {
        std::string replacement = optional_string(p, "replacement", at).value_or(std::string(kSpmSpace));
        if (replacement != kSpmSpace)
            (at / "replacement").fail("Metaspace replacement '{}' is not supported (only \"\u2581\")", replacement);
        out.spm_spaces = true;
        out.metaspace = true;
        out.metaspace_split = optional_bool(p, "split", at).value_or(true);
        if (auto scheme = optional_string(p, "prepend_scheme", at)) {
            if (*scheme == "first" || *scheme == "always")
                out.prepend_space = true;
            else if (*scheme != "never")
                (at / "prepend_scheme").fail("Metaspace prepend_scheme '{}' is not one of first, always, never", *scheme);
            out.prepend_scheme = *scheme;
        } else if (optional_bool(p, "add_prefix_space", at).value_or(true)) {  // the older form
            out.prepend_space = true;
            out.prepend_scheme = "always";
        } else {
            out.prepend_scheme = "never";
        }
    } else if (type == "BertPreTokenizer") {
        out.bert_pre_tokenizer = true;
    } else if (type == "WhitespaceSplit") {
        // T5's split at whitespace before Metaspace: SentencePiece's remove_extra_whitespaces.
        if (out.metaspace) (at / "type").fail("WhitespaceSplit after Metaspace is not supported");
        out.whitespace_split = true;
    } else {
        (at / "type").fail("pre-tokenizer type '{}' is not supported (pagoda supports Sequence, ByteLevel, Split, Digits, "
                           "Punctuation, Metaspace, WhitespaceSplit and BertPreTokenizer)",
                           type);
    }
}

// TemplateProcessing's pair template: SpecialToken items (each a single id) and Sequence A / B.
void read_pair_template(const Json& pair, const JsonPath& at, const Json* specials, const JsonPath& processor_at,
                        AddedAround& out) {
    as_array(pair, at);
    std::vector<TemplatePiece> items;
    for (size_t i = 0; i < pair.size(); ++i) {
        const JsonPath item_at = at[i];
        const Json& item = as_object(pair[i], item_at);
        TemplatePiece piece;
        if (const Json* seq = member(item, "Sequence")) {
            const JsonPath seq_at = item_at / "Sequence";
            const std::string& id = as_string(required(as_object(*seq, seq_at), "id", seq_at), seq_at / "id");
            if (id != "A" && id != "B") (seq_at / "id").fail("'{}' is not A or B", id);
            piece.sequence = id == "A" ? 0 : 1;
            piece.type_id = int(as_token_id(required(*seq, "type_id", seq_at), seq_at / "type_id"));
        } else {
            const JsonPath sp_at = item_at / "SpecialToken";
            const Json& special = as_object(required(item, "SpecialToken", item_at), sp_at);
            const std::string& name = as_string(required(special, "id", sp_at), sp_at / "id");
            const JsonPath def_at = processor_at / "special_tokens" / name;
            if (!specials || !member(*specials, name)) def_at.fail("is missing (named by {})", item_at.path);
            const Json& ids = as_array(required((*specials)[name], "ids", def_at), def_at / "ids");
            if (ids.size() != 1) (def_at / "ids").fail("holds {} ids; pagoda adds single tokens", ids.size());
            piece.token = int32_t(as_token_id(ids[0], (def_at / "ids")[0]));
            piece.type_id = int(as_token_id(required(special, "type_id", sp_at), sp_at / "type_id"));
        }
        items.push_back(piece);
    }
    out.pair = std::move(items);
}

void read_processor(const Json& p, const JsonPath& at, AddedAround& out) {
    const std::string& type = type_of(p, at);
    if (type == "Sequence") {
        const Json& steps = as_array(required(p, "processors", at), at / "processors");
        for (size_t i = 0; i < steps.size(); ++i) read_processor(steps[i], (at / "processors")[i], out);
        return;
    }
    if (type == "ByteLevel") return;  // only adjusts offsets
    out.type = type;
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        // {"sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}: cls A sep (pair: cls A sep B sep for BERT with
        // B typed 1; cls A sep sep B sep all typed 0 for RoBERTa).
        auto token = [&](const char* key) {
            const Json& pair = as_array(required(p, key, at), at / key);
            if (pair.size() != 2) (at / key).fail("must be a [token, id] pair");
            return as_token_id(pair[1], (at / key)[1]);
        };
        const int32_t cls = int32_t(token("cls")), sep = int32_t(token("sep"));
        out.before = cls;
        out.after = sep;
        if (type == "BertProcessing")
            out.pair = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {-1, 1, 1}, {sep, 0, 1}};
        else
            out.pair = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {sep, 0, 0}, {-1, 1, 0}, {sep, 0, 0}};
        return;
    }
    if (type != "TemplateProcessing")
        (at / "type").fail("post-processor type '{}' is not supported (pagoda supports TemplateProcessing, BertProcessing, "
                           "RobertaProcessing, ByteLevel and Sequence)",
                           type);
    const Json& single = as_array(required(p, "single", at), at / "single");
    const Json* specials = member(p, "special_tokens");
    int before = 0, after = 0;
    bool seen_text = false;
    for (size_t i = 0; i < single.size(); ++i) {
        const JsonPath item_at = (at / "single")[i];
        const Json& item = as_object(single[i], item_at);
        if (member(item, "Sequence")) {
            if (seen_text) item_at.fail("the template holds the text twice");
            seen_text = true;
            continue;
        }
        const Json& special = as_object(required(item, "SpecialToken", item_at), item_at / "SpecialToken");
        const std::string& name = as_string(required(special, "id", item_at / "SpecialToken"), item_at / "SpecialToken" / "id");
        const JsonPath def_at = at / "special_tokens" / name;
        if (!specials || !member(*specials, name)) def_at.fail("is missing (named by {})", item_at.path);
        const Json& ids = as_array(required((*specials)[name], "ids", def_at), def_at / "ids");
        if (ids.size() != 1) (def_at / "ids").fail("holds {} ids; pagoda adds single tokens", ids.size());
        int64_t id = as_token_id(ids[0], (def_at / "ids")[0]);
        (seen_text ? out.after : out.before) = id;
        ++(seen_text ? after : before);
    }
    if (!seen_text) (at / "single").fail("has no Sequence item for the text");
    if (before > 1 || after > 1)
        (at / "single").fail("adds {} tokens before and {} after the text; pagoda adds at most one BOS and one EOS", before, after);
    if (const Json* pair = member(p, "pair")) read_pair_template(*pair, at / "pair", specials, at, out);
}

void check_decoder_step(const Json& d, const JsonPath& at, bool wordpiece, const std::string& continuing_prefix) {
    const std::string& type = type_of(d, at);
    if (type == "Sequence") {
        const Json& steps = as_array(required(d, "decoders", at), at / "decoders");
        for (size_t i = 0; i < steps.size(); ++i)
            check_decoder_step(steps[i], (at / "decoders")[i], wordpiece, continuing_prefix);
        return;
    }
    if (type == "WordPiece") {
        if (!wordpiece) (at / "type").fail("a WordPiece decoder is only supported with a WordPiece model");
        const std::string prefix = optional_string(d, "prefix", at).value_or("##");
        if (prefix != continuing_prefix)
            (at / "prefix").fail("'{}' differs from the model's continuing_subword_prefix '{}'", prefix, continuing_prefix);
        // cleanup (" ." -> ".", " n't" -> "n't", ...) is not applied: decode() keeps the spaces between words.
        return;
    }
    for (const char* known : {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"})
        if (type == known) return;
    (at / "type").fail("decoder type '{}' is not supported (pagoda decodes byte-level and SentencePiece pieces)", type);
}

nlohmann::ordered_json split_step(const std::string& regex) {
    return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

nlohmann::ordered_json byte_level_step(bool use_regex) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

nlohmann::ordered_json replace_step(std::string_view from, std::string_view to) {
    return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

}  // namespace

TextPipeline read_text_pipeline(const Json& tokenizer_json, const JsonPath& root) {
    TextPipeline out;
    if (const Json* n = member(tokenizer_json, "normalizer")) read_normalizer(*n, root / "normalizer", out);
    if (const Json* p = member(tokenizer_json, "pre_tokenizer")) read_pre_tokenizer(*p, root / "pre_tokenizer", out);
    if (out.byte_level && (out.spm_spaces || out.prepend_space))
        root.fail("the pipeline mixes a ByteLevel step with SentencePiece's \u2581 spaces");
    return out;
}

AddedAround read_post_processor(const Json& tokenizer_json, const JsonPath& root) {
    AddedAround out;
    if (const Json* p = member(tokenizer_json, "post_processor")) read_processor(*p, root / "post_processor", out);
    return out;
}

void check_decoder(const Json& tokenizer_json, const JsonPath& root, bool wordpiece, const std::string& continuing_prefix) {
    if (const Json* d = member(tokenizer_json, "decoder")) check_decoder_step(*d, root / "decoder", wordpiece, continuing_prefix);
}

std::optional<std::string> pre_tokenizer_name_for(const std::vector<std::string>& patterns,
                                                  std::optional<bool> ignore_merges) {
    for (const PreTokenizerDef& def : known_pre_tokenizers()) {
        if (def.patterns != patterns) continue;
        if (ignore_merges && *ignore_merges != def.traits.ignore_merges) continue;
        if (def.traits.no_bos) continue;  // a name that drops BOS would override what the file says
        return def.names.front();
    }
    return std::nullopt;
}

nlohmann::ordered_json normalizer_json(const Vocab& vocab) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    if (vocab.nfc()) steps.push_back({{"type", "NFC"}});
    if (vocab.type() == VocabType::spm) {
        if (vocab.add_space_prefix()) steps.push_back({{"type", "Prepend"}, {"prepend", kSpmSpace}});
        steps.push_back(replace_step(" ", kSpmSpace));
    }
    if (steps.empty()) return nullptr;
    if (steps.size() == 1) return steps[0];  // a lone Replace: Gemma's form
    return {{"type", "Sequence"}, {"normalizers", steps}};
}

nlohmann::ordered_json pre_tokenizer_json(const Vocab& vocab) {
    if (vocab.type() == VocabType::spm) return nullptr;
    const std::vector<std::string>& patterns = vocab.pre_patterns();
    if (patterns.size() == 1 && patterns[0] == gpt2_regex()) return byte_level_step(true);  // GPT-2's own form
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const std::string& p : patterns) steps.push_back(split_step(p));
    steps.push_back(byte_level_step(false));
    return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

nlohmann::ordered_json post_processor_json(const Vocab& vocab) {
    const bool bos = vocab.add_bos() && vocab.bos() != kNoToken;
    const bool eos = vocab.add_eos() && vocab.eos() != kNoToken;
    if (!bos && !eos) {
        if (vocab.type() == VocabType::spm) return nullptr;
        return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
    }
    auto special = [&](int32_t id, int type_id) {
        return nlohmann::ordered_json{{"SpecialToken", {{"id", vocab.text(id)}, {"type_id", type_id}}}};
    };
    auto sequence = [](const char* name, int type_id) {
        return nlohmann::ordered_json{{"Sequence", {{"id", name}, {"type_id", type_id}}}};
    };
    nlohmann::ordered_json single = nlohmann::ordered_json::array(), pair = nlohmann::ordered_json::array();
    nlohmann::ordered_json specials = nlohmann::ordered_json::object();
    if (bos) {
        single.push_back(special(vocab.bos(), 0));
        pair.push_back(special(vocab.bos(), 0));
    }
    single.push_back(sequence("A", 0));
    pair.push_back(sequence("A", 0));
    if (eos) pair.push_back(special(vocab.eos(), 0));
    if (bos) pair.push_back(special(vocab.bos(), 1));
    pair.push_back(sequence("B", 1));
    if (eos) {
        single.push_back(special(vocab.eos(), 0));
        pair.push_back(special(vocab.eos(), 1));
    }
    for (int32_t id : {bos ? vocab.bos() : kNoToken, eos ? vocab.eos() : kNoToken}) {
        if (id == kNoToken) continue;
        specials[vocab.text(id)] = {{"id", vocab.text(id)}, {"ids", {id}}, {"tokens", {vocab.text(id)}}};
    }
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

nlohmann::ordered_json decoder_json(const Vocab& vocab) {
    if (vocab.type() == VocabType::bpe)
        return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    nlohmann::ordered_json steps = nlohmann::ordered_json::array(
        {replace_step(kSpmSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
    if (vocab.add_space_prefix()) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    return {{"type", "Sequence"}, {"decoders", steps}};
}

}  // namespace pagoda::tokenizer::hf
