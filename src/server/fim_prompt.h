// Fill-in-the-middle prompts, assembled by llama-server's /infill rule so a code model sees the
// token sequence it was trained on and that llama.cpp users already get:
//   [extra] [BOS] <PRE> prefix prompt <SUF> suffix <MID>       (PSM, the default)
//   [extra] [BOS] <SUF> suffix <PRE> prefix prompt <MID>       (SPM, --spm-infill)
// where [extra] is the repository context: <REPO>"myproject\n", then per chunk <FILE_SEP>
// filename"\n" text, then <FILE_SEP>"filename\n" (without those tokens each chunk is led by the
// text "\n\n--- snippet ---\n\n" and no repo/file lines are written). BOS only where the vocabulary
// adds one. Budget (llama-server's): the prefix keeps its last 3*(n_batch/4) tokens, the suffix its
// first max(0, n_batch/4 - (2 + |prompt|)), the extra context its last max(0, n_ctx - n_batch -
// 2*n_predict) tokens. Text is encoded without BOS/EOS and without parsing special-token text.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_request.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

struct FimBudget {
    int64_t n_batch = 2048;  // the prefix/suffix share (the engine's tokens per step, at most the context)
    int64_t n_ctx = 4096;    // the context
    int64_t n_predict = 16;  // tokens the completion may generate
};

struct FimVocab {
    tokenizer::FimTokens tokens;
    int32_t bos = tokenizer::kNoToken;  // written first when add_bos
    bool add_bos = false;
};

using TextEncoder = std::function<std::vector<int32_t>(std::string_view)>;

// The prompt token sequence. `tokens.usable()` must hold (require_fim checks it first).
std::vector<int32_t> assemble_infill(const FimVocab& vocab, const TextEncoder& encode, std::vector<int32_t> prefix,
                                     std::vector<int32_t> suffix, const std::vector<FimChunk>& extra,
                                     const std::vector<int32_t>& prompt, const FimBudget& budget, bool spm);

// The vocabulary's FIM view; throws ApiError 400 (code fim_not_supported, param `param`) when it has
// no prefix/suffix/middle tokens.
FimVocab require_fim(const tokenizer::Tokenizer& tok, const char* param);

}  // namespace pagoda::server
