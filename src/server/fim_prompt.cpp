#include "server/fim_prompt.h"

#include <algorithm>
#include <fmt/format.h>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

void append(std::vector<int32_t>& to, const std::vector<int32_t>& ids) { to.insert(to.end(), ids.begin(), ids.end()); }

// The repository context before the FIM prefix (see the header for its form).
std::vector<int32_t> extra_context(const FimVocab& v, const TextEncoder& encode, const std::vector<FimChunk>& extra) {
    const tokenizer::FimTokens& t = v.tokens;
    std::vector<int32_t> out;
    if (t.repo != tokenizer::kNoToken) {
        out.push_back(t.repo);
        append(out, encode("myproject\n"));  // llama-server's fixed project name
    }
    for (const FimChunk& chunk : extra) {
        if (t.file_sep != tokenizer::kNoToken) {
            out.push_back(t.file_sep);
            append(out, encode(chunk.filename + "\n"));
        } else {
            append(out, encode("\n\n--- snippet ---\n\n"));
        }
        append(out, encode(chunk.text));
    }
    if (t.file_sep != tokenizer::kNoToken) {  // the file being edited (llama-server names it "filename")
        out.push_back(t.file_sep);
        append(out, encode("filename\n"));
    }
    return out;
}

}  // namespace

std::vector<int32_t> assemble_infill(const FimVocab& v, const TextEncoder& encode, std::vector<int32_t> prefix,
                                     std::vector<int32_t> suffix, const std::vector<FimChunk>& extra,
                                     const std::vector<int32_t>& prompt, const FimBudget& b, bool spm) {
    const std::vector<int32_t> extra_tokens = extra_context(v, encode, extra);
    // llama-server's shares, in its integer arithmetic: the prefix gets 3/4 of a batch (its end is
    // kept: it is next to the hole), the suffix what is left of the last quarter after the prompt
    // and two FIM tokens (its start is kept), the extra context what the context has beyond a batch
    // and twice the completion (its end is kept: the last chunks are the most recent).
    const int64_t quarter = b.n_batch / 4;
    const int64_t prefix_take = std::min<int64_t>(int64_t(prefix.size()), 3 * quarter);
    const int64_t suffix_take =
        std::min<int64_t>(int64_t(suffix.size()), std::max<int64_t>(0, quarter - (2 + int64_t(prompt.size()))));
    const int64_t extra_take =
        std::min<int64_t>(std::max<int64_t>(0, b.n_ctx - b.n_batch - 2 * b.n_predict), int64_t(extra_tokens.size()));
    prefix.erase(prefix.begin(), prefix.end() - prefix_take);
    suffix.resize(size_t(suffix_take));

    prefix.insert(prefix.begin(), v.tokens.prefix);
    append(prefix, prompt);
    suffix.insert(suffix.begin(), v.tokens.suffix);

    std::vector<int32_t> out(extra_tokens.end() - extra_take, extra_tokens.end());
    if (v.add_bos && v.bos != tokenizer::kNoToken) out.push_back(v.bos);
    append(out, spm ? suffix : prefix);
    append(out, spm ? prefix : suffix);
    out.push_back(v.tokens.middle);
    return out;
}

FimVocab require_fim(const tokenizer::Tokenizer& tok, const char* param) {
    const tokenizer::Vocab& vocab = tok.vocab();
    if (!vocab.fim().usable()) {
        std::vector<std::string> missing;
        if (vocab.fim().prefix == tokenizer::kNoToken) missing.push_back("prefix");
        if (vocab.fim().suffix == tokenizer::kNoToken) missing.push_back("suffix");
        if (vocab.fim().middle == tokenizer::kNoToken) missing.push_back("middle");
        throw ApiError::invalid(fmt::format("this model cannot fill in the middle: its vocabulary has no FIM {} "
                                            "token{} (a code model with fill-in-the-middle tokens is needed)",
                                            fmt::join(missing, "/"), missing.size() > 1 ? "s" : ""),
                                param, "fim_not_supported");
    }
    return FimVocab{vocab.fim(), tok.bos(), vocab.add_bos()};
}

}  // namespace pagoda::server
