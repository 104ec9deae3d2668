#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/error.h"

namespace pagoda::engine {

void SchedulerConfig::validate() const {
    if (max_seqs < 1) fail("max_seqs must be at least 1, got {}", max_seqs);
    if (max_batched_tokens < max_seqs)
        fail("max_batched_tokens ({}) must be at least max_seqs ({}) so every running sequence can decode each step",
             max_batched_tokens, max_seqs);
    if (!(kv_watermark >= 0 && kv_watermark < 1)) fail("kv_watermark {} is out of range [0, 1)", kv_watermark);
}

Scheduler::Scheduler(SchedulerConfig config, kv::BlockManager& blocks) : config_(config), blocks_(blocks) {
    config_.validate();
}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
    if (config_.policy == SchedulingPolicy::priority && a->priority != b->priority) return a->priority < b->priority;
    if (a->arrival != b->arrival) return a->arrival < b->arrival;
    return a->index < b->index;
}

void Scheduler::enqueue(Sequence* seq) {
    seq->status = SeqStatus::waiting;
    auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                                [this](const Sequence* a, const Sequence* b) { return before(a, b); });
    waiting_.insert(pos, seq);
}

void Scheduler::add(Sequence* seq) {
    if (seq->tokens.empty()) fail("scheduler: sequence {} has no tokens", seq->id);
    seq->n_computed = 0;
    enqueue(seq);
}

int32_t Scheduler::seats_in_use() const {
    int32_t n = 0;
    for (const Sequence* s : running_) n += s->seats;
    return n;
}

Sequence* Scheduler::newest_running() const { return running_.empty() ? nullptr : running_.back(); }

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
    blocks_.free(seq->id);
    seq->draft.clear();
    seq->n_computed = 0;
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    enqueue(seq);  // ahead of everything that arrived after it: the front under FCFS
    ++seq->n_preemptions;
    ++preemptions_;
    plan.preempted.push_back(seq);
}

bool Scheduler::prefix_in_flight(const Sequence* seq) const {
    if (!config_.defer_shared_prefix || !seq->reuse_prefix || !blocks_.prefix_caching()) return false;
    const int64_t reusable = blocks_.max_reusable_blocks(seq->tokens);
    const int64_t cached = blocks_.cached_prefix_blocks(seq->tokens, 0);
    if (cached >= reusable) return false;
    const int64_t bs = blocks_.block_size();
    for (const Sequence* r : running_) {
        if (r->n_computed >= reusable * bs) continue;  // whatever it shares is computed (and cached) already
        const size_t n = std::min(r->tokens.size(), seq->tokens.size());
        size_t same = 0;
        while (same < n && r->tokens[same] == seq->tokens[same]) ++same;
        const int64_t shared_blocks = std::min(int64_t(same) / bs, reusable);
        if (shared_blocks > cached && r->n_computed < shared_blocks * bs) return true;
    }
    return false;
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    int64_t budget = config_.max_batched_tokens;

    // Sequences with part of their prompt still to compute (collected before decodes append).
    std::vector<Sequence*> prefilling;
    for (Sequence* s : running_)
        if (blocks_.num_tokens(s->id) == int64_t(s->tokens.size()) && s->n_computed < int64_t(s->tokens.size()))
            prefilling.push_back(s);

    // 1. Decodes, oldest first; preempt the newest when the pool is full. Drafts come out of what
    // the budget leaves after one token for every decode, and are dropped before anyone is preempted.
    int64_t decodes_left = 0;
    for (Sequence* s : running_) decodes_left += int64_t(s->tokens.size()) > blocks_.num_tokens(s->id) ? 1 : 0;
    for (size_t i = 0; i < running_.size(); ++i) {
        Sequence* s = running_[i];
        const int64_t in_kv = blocks_.num_tokens(s->id);
        const int64_t n_real = int64_t(s->tokens.size()) - in_kv;
        if (n_real <= 0) {
            s->draft.clear();
            continue;
        }
        --decodes_left;
        const int64_t spare = budget - n_real - decodes_left;
        if (int64_t(s->draft.size()) > spare) s->draft.resize(size_t(std::max<int64_t>(0, spare)));
        if (!s->draft.empty() && !blocks_.can_append(s->id, n_real + int64_t(s->draft.size()))) s->draft.clear();
        const int64_t n_new = n_real + int64_t(s->draft.size());
        bool self_preempted = false;
        while (!blocks_.can_append(s->id, n_new)) {
            Sequence* victim = newest_running();
            preempt(victim, plan);
            if (victim == s) {
                self_preempted = true;
                break;
            }
        }
        if (self_preempted) break;  // it was the newest: nothing after it is running
        blocks_.append(s->id, std::span<const int32_t>(s->tokens).subspan(size_t(in_kv)), plan.copies);
        if (!s->draft.empty()) blocks_.append(s->id, s->draft, plan.copies);
        const int64_t end = int64_t(s->tokens.size() + s->draft.size());
        plan.chunks.push_back({s, s->n_computed, end, true, int64_t(s->draft.size())});
        plan.n_decode_tokens += end - s->n_computed;
        plan.n_draft_tokens += int64_t(s->draft.size());
        budget -= end - s->n_computed;
    }

    // 2. Continue partly computed prompts, oldest first.
    for (Sequence* s : prefilling) {
        if (budget <= 0) break;
        if (s->status != SeqStatus::running) continue;  // preempted above
        const int64_t size = int64_t(s->tokens.size());
        const int64_t chunk = std::min(budget, size - s->n_computed);
        plan.chunks.push_back({s, s->n_computed, s->n_computed + chunk, s->n_computed + chunk == size});
        plan.n_prefill_tokens += chunk;
        budget -= chunk;
    }

    // 3. Admit waiting sequences in queue order (none in a step that had to preempt).
    const int32_t watermark = int32_t(std::ceil(config_.kv_watermark * double(blocks_.n_blocks())));
    int32_t seats = seats_in_use();
    while (plan.preempted.empty() && budget > 0 && !waiting_.empty()) {
        Sequence* s = waiting_.front();
        if (seats + s->seats > config_.max_seqs) break;
        const int32_t reserve = running_.empty() ? 0 : watermark;
        if (int64_t(blocks_.blocks_needed(s->tokens, 0, s->reuse_prefix)) + reserve > blocks_.num_available_blocks()) break;
        if (prefix_in_flight(s)) break;
        int64_t n_tier = 0;
        if (source_ && s->reuse_prefix && blocks_.prefix_caching()) {
            const int64_t first = blocks_.cached_prefix_blocks(s->tokens, 0);
            const int64_t max = blocks_.max_reusable_blocks(s->tokens);
            if (first < max) n_tier = source_->stage(s->tokens, first, max);
        }
        kv::AllocateResult r = blocks_.allocate(s->id, s->tokens, 0, s->reuse_prefix, n_tier);
        if (r.status != kv::KvStatus::ok) break;
        if (n_tier > 0) source_->load(r.tier_blocks);
        waiting_.pop_front();
        s->n_computed = r.n_cached_tokens;
        if (s->first_cached_tokens < 0) s->first_cached_tokens = r.n_cached_tokens;
        s->status = SeqStatus::running;
        s->admitted = ++admissions_;
        running_.push_back(s);
        seats += s->seats;
        const int64_t size = int64_t(s->tokens.size());
        const int64_t chunk = std::min(budget, size - s->n_computed);
        plan.chunks.push_back({s, s->n_computed, s->n_computed + chunk, s->n_computed + chunk == size});
        plan.n_prefill_tokens += chunk;
        budget -= chunk;
    }
    plan.n_tokens = plan.n_decode_tokens + plan.n_prefill_tokens;
    return plan;
}

void Scheduler::complete(const StepPlan& plan) {
    for (const ScheduledChunk& c : plan.chunks) {
        if (c.seq->status != SeqStatus::running || !blocks_.has_sequence(c.seq->id)) continue;
        blocks_.mark_computed(c.seq->id, c.end - c.n_draft);
        c.seq->n_computed = c.end - c.n_draft;
    }
}

void Scheduler::accept_draft(const ScheduledChunk& c, int64_t accepted) {
    Sequence* s = c.seq;
    if (c.n_draft == 0 || s->status != SeqStatus::running || !blocks_.has_sequence(s->id)) return;
    if (accepted < 0 || accepted > c.n_draft) fail("scheduler: {} of {} drafted tokens accepted", accepted, c.n_draft);
    const int64_t computed = c.end - c.n_draft + accepted;
    blocks_.mark_computed(s->id, computed);
    blocks_.truncate(s->id, computed);
    s->n_computed = computed;
}

void Scheduler::fork(Sequence* parent, Sequence* child) {
    if (parent->status != SeqStatus::running) fail("scheduler: cannot fork sequence {}: not running", parent->id);
    blocks_.fork(parent->id, child->id);
    child->n_computed = parent->n_computed;
    child->status = SeqStatus::running;
    child->admitted = ++admissions_;
    child->seats = 1;
    parent->seats = 1;
    running_.push_back(child);
}

void Scheduler::remove(Sequence* seq) {
    if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
    if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
    if (blocks_.has_sequence(seq->id)) blocks_.free(seq->id);
    seq->status = SeqStatus::finished;
}

}  // namespace pagoda::engine
