#include "engine/prompt_logprobs.h"

#include "engine/logprobs.h"

namespace pagoda::engine {

bool wants_prompt_logprob(const Sequence& s, int64_t position) {
    if (!s.request || s.request->request.prompt_logprobs < 0) return false;
    return position + 1 < s.n_prompt && position >= int64_t(s.request->prompt_logprobs.size());
}

int64_t collect_prompt_logprobs(const ScheduledChunk& c, const float* rows, int64_t vocab) {
    const Sequence& s = *c.seq;
    int64_t n = 0;
    for (int64_t p = c.begin; p < c.end; ++p) {
        if (!wants_prompt_logprob(s, p)) continue;
        const float* row = rows + n * vocab;
        ++n;
        const int32_t token = s.tokens[size_t(p + 1)];
        const LogSoftmax norm = log_softmax_of(row, vocab);
        TokenLogprob lp = top_logprobs(row, vocab, norm, s.request->request.prompt_logprobs);
        lp.token = token;
        lp.logprob = float(double(row[token]) - norm.max - norm.log_sum);
        lp.rank = rank_of(row, vocab, token);
        s.request->prompt_logprobs.push_back(std::move(lp));
    }
    return n;
}

int32_t rank_of(const float* logits, int64_t vocab, int32_t token) {
    const float v = logits[token];
    int32_t rank = 1;
    for (int64_t i = 0; i < vocab; ++i)
        if (logits[i] > v || (logits[i] == v && i < token)) ++rank;
    return rank;
}

}  // namespace pagoda::engine
