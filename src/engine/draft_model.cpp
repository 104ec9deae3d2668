#include "engine/draft_model.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/clock.h"

namespace pagoda::engine {

DraftModelProposer::DraftModelProposer(model::StepModel& draft, int64_t target_vocab, int64_t max_step_tokens)
    : model_(draft),
      vocab_(std::min(draft.info().vocab_size, target_vocab)),
      max_step_tokens_(max_step_tokens),
      blocks_(draft.info().n_kv_blocks, draft.info().block_size, /*prefix_caching=*/true) {
    if (vocab_ < 1) fail("speculative decoding: the draft model reports an empty vocabulary");
    if (max_step_tokens_ < 1) fail("speculative decoding: the draft step size must be positive, got {}", max_step_tokens_);
}

void DraftModelProposer::drop(kv::SeqId seq) {
    if (blocks_.has_sequence(seq)) blocks_.free(seq);
}

void DraftModelProposer::retain(std::span<const kv::SeqId> live) {
    for (kv::SeqId seq : blocks_.sequences())
        if (std::find(live.begin(), live.end(), seq) == live.end()) blocks_.free(seq);
}

bool DraftModelProposer::align(const DraftWant& want, Active& a) {
    const auto& tokens = want.tokens;
    const int64_t n = int64_t(tokens.size());
    a.seq = want.seq;
    a.tokens = tokens;
    a.k = int32_t(std::min<int64_t>(want.k, model_.info().max_context - n + 1));
    if (n < 1 || a.k < 1) return false;
    if (!blocks_.has_sequence(want.seq)) {
        if (!blocks_.can_allocate(tokens)) return false;
        const kv::AllocateResult r = blocks_.allocate(want.seq, tokens);
        if (r.status != kv::KvStatus::ok) return false;
        a.next = r.n_cached_tokens;  // a prefix cached in the draft pool (another sequence's prompt)
        return true;
    }
    // What was fed and still agrees with the target, less its last token (fed again for logits).
    const std::vector<int32_t>& fed = blocks_.tokens(want.seq);
    const int64_t common = std::mismatch(fed.begin(), fed.begin() + std::min<int64_t>(int64_t(fed.size()), n),
                                         tokens.begin())
                               .first -
                           fed.begin();
    const int64_t keep = std::min(common, n - 1);
    const int64_t computed = blocks_.num_computed(want.seq);
    if (keep < computed) {  // the target's tokens changed under it (cannot happen: they only grow)
        drop(want.seq);
        return false;
    }
    blocks_.truncate(want.seq, keep);
    blocks_.mark_computed(want.seq, keep);
    stats_.reused_tokens += keep - computed;
    std::vector<kv::BlockCopy> copies;
    if (blocks_.append(want.seq, tokens.subspan(size_t(keep)), copies) != kv::KvStatus::ok) {
        drop(want.seq);
        return false;
    }
    // A draft sequence is never forked, so its blocks are never shared and need no copy.
    if (!copies.empty()) fail("speculative decoding: a draft sequence's block was shared");
    a.next = keep;
    return true;
}

void DraftModelProposer::add_rows(Active& a, int64_t end, bool logits,
                                  std::unordered_map<kv::SeqId, int32_t>& tables) {
    auto [it, added] = tables.try_emplace(a.seq, 0);
    if (added) it->second = batch_.add_sequence(blocks_.block_table(a.seq));
    const std::vector<int32_t>& fed = blocks_.tokens(a.seq);
    for (int64_t p = a.next; p < end; ++p)
        batch_.add(fed[size_t(p)], int32_t(p), it->second, blocks_.slot(a.seq, p), logits && p + 1 == end);
    a.next = end;
}

std::vector<int32_t> DraftModelProposer::run_batch() {
    const auto start = Clock::now();
    const std::vector<float> logits = model_.forward(batch_);
    last_forwards_.push_back({batch_.size(), std::chrono::duration<double>(Clock::now() - start).count()});
    ++stats_.forwards;
    stats_.fed_tokens += batch_.size();
    const int64_t stride = model_.info().vocab_size;
    const int64_t rows = batch_.n_logit_rows();
    if (int64_t(logits.size()) != rows * stride)
        fail("speculative decoding: the draft model returned {} logits, expected {}", logits.size(), rows * stride);
    std::vector<int32_t> best(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = logits.data() + r * stride;
        best[size_t(r)] = int32_t(std::max_element(row, row + vocab_) - row);  // ties: the lowest id
    }
    return best;
}

std::vector<std::vector<int32_t>> DraftModelProposer::propose(std::span<const DraftWant> wants) {
    std::vector<std::vector<int32_t>> drafts(wants.size());
    last_forwards_.clear();
    std::vector<Active> active;
    active.reserve(wants.size());
    for (size_t i = 0; i < wants.size(); ++i) {
        Active a;
        if (!align(wants[i], a)) {
            ++stats_.dropped;
            continue;
        }
        a.out = &drafts[i];
        active.push_back(a);
    }
    try {
        // Catch-up: feed every sequence up to its last real token (chunked to the step size); the
        // last token's logits give the first draft.
        for (;;) {
            batch_.clear();
            std::unordered_map<kv::SeqId, int32_t> tables;
            std::vector<Active*> finishing;
            int64_t budget = max_step_tokens_;
            for (Active& a : active) {
                const int64_t n = int64_t(a.tokens.size());
                if (a.next >= n || budget == 0) continue;
                const int64_t end = std::min(n, a.next + budget);
                budget -= end - a.next;
                add_rows(a, end, end == n, tables);
                if (end == n) finishing.push_back(&a);
            }
            if (batch_.size() == 0) break;
            const std::vector<int32_t> best = run_batch();
            for (size_t j = 0; j < finishing.size(); ++j) finishing[j]->out->push_back(best[j]);
        }
        // Draft rounds: feed draft j-1, get draft j; every drafting sequence in each forward.
        for (int32_t j = 1;; ++j) {
            batch_.clear();
            std::unordered_map<kv::SeqId, int32_t> tables;
            std::vector<Active*> round;
            for (Active& a : active) {
                if (a.k <= j || int64_t(a.out->size()) != j) continue;
                std::vector<kv::BlockCopy> copies;
                if (blocks_.append(a.seq, std::span(&a.out->back(), 1), copies) != kv::KvStatus::ok) continue;
                add_rows(a, a.next + 1, true, tables);
                round.push_back(&a);
            }
            if (round.empty()) break;
            const std::vector<int32_t> best = run_batch();
            for (size_t r = 0; r < round.size(); ++r) round[r]->out->push_back(best[r]);
        }
    } catch (...) {
        for (const Active& a : active) drop(a.seq);
        throw;
    }
    // Everything fed is KV in the draft pool; only the last real token stays "uncomputed".
    for (const Active& a : active) blocks_.mark_computed(a.seq, int64_t(a.tokens.size()) - 1);
    return drafts;
}

}  // namespace pagoda::engine
