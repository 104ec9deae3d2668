#include "fuzz/grammar_checks.h"

#include <bit>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::fuzz {

namespace {

struct Vocabulary {
    const tokenizer::Tokenizer* tok = nullptr;
    std::shared_ptr<const grammar::TokenTrie> trie;
    std::vector<std::string> pieces;
};

const Vocabulary& vocabulary() {
    static const Vocabulary v = [] {
        Vocabulary out;
        out.tok = small_tokenizer();
        if (!out.tok) return out;
        out.trie = std::make_shared<grammar::TokenTrie>(*out.tok);
        for (int32_t id = 0; id < out.tok->n_vocab(); ++id) out.pieces.push_back(out.tok->token_to_piece(id));
        return out;
    }();
    return v;
}

[[noreturn]] void mismatch(const char* what, int32_t id) {
    std::fprintf(stderr, "fuzz: token mask disagrees with the matcher: %s (token %d)\n", what, id);
    std::abort();
}

void check_mask(grammar::TokenMasker& masker, const grammar::Matcher& m, int64_t budget) {
    const Vocabulary& v = vocabulary();
    const std::vector<uint64_t> bits = masker.allowed(m.state(), budget);
    const int32_t n = v.tok->n_vocab();
    int64_t allowed = 0, sampled = 0;
    for (int32_t id = 0; id < n; ++id) {
        const bool on = (bits[size_t(id) / 64] >> (id % 64)) & 1;
        if (!on) continue;
        ++allowed;
        if (masker.is_end_token(id)) {
            if (!m.can_end()) mismatch("an end token is allowed where the grammar cannot end", id);
            continue;
        }
        if (sampled < 8 && (id * 2654435761u) % 5 == 0) {
            ++sampled;
            grammar::Matcher copy = m;
            if (!copy.accept(v.pieces[size_t(id)])) mismatch("an allowed token is rejected", id);
        }
    }
    for (int32_t end : masker.end_tokens()) {
        const bool on = (bits[size_t(end) / 64] >> (end % 64)) & 1;
        if (budget == grammar::TokenMasker::kNoBudget && on != m.can_end())
            mismatch("the end token's bit differs from can_end()", end);
    }
    std::vector<float> logits(size_t(n), 0.0f);
    const int64_t kept = masker.apply(m.state(), logits.data(), n, budget);
    int64_t finite = 0;
    for (float x : logits) finite += std::isfinite(x);
    if (kept != allowed || finite != allowed) mismatch("apply() keeps a different set than allowed()", -1);
}

}  // namespace

void exercise_grammar(const std::shared_ptr<const grammar::Grammar>& g, std::string_view input) {
    const Vocabulary& v = vocabulary();
    try {
        grammar::Matcher m(g);
        std::unique_ptr<grammar::TokenMasker> masker;
        std::vector<int32_t> ends;
        if (v.tok && v.tok->eos() >= 0) ends.push_back(v.tok->eos());
        if (v.tok) masker = std::make_unique<grammar::TokenMasker>(g, v.trie, ends, 16, 256);
        if (masker) check_mask(*masker, m, grammar::TokenMasker::kNoBudget);
        size_t accepted = 0;
        for (size_t i = 0; i < input.size() && i < 4096; ++i) {
            const grammar::MatchState before = m.state();
            if (!m.accept(input.substr(i, 1))) {
                if (!(m.state() == before)) mismatch("a rejected byte changed the state", -1);
                continue;
            }
            if (masker && ++accepted % 16 == 1) {
                check_mask(*masker, m, grammar::TokenMasker::kNoBudget);
                check_mask(*masker, m, 1 + int64_t(accepted % 7));
            }
        }
        (void)grammar::completion_bytes(*g, m.state());
    } catch (const Error&) {
    } catch (const std::exception& e) {
        unexpected("grammar matcher", e);
    }
}

}  // namespace pagoda::fuzz
