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
    if (max_image_tokens < 1) fail("max_image_tokens must be at least 1, got {}", max_image_tokens);
    if (!(kv_watermark >= 0 && kv_watermark < 1)) fail("kv_watermark {} is out of range [0, 1)", kv_watermark);
    if (state_snapshots < 0) fail("state_snapshots must not be negative, got {}", state_snapshots);
    if (state_snapshots > 0 && !recurrent_state) fail("state_snapshots are for a model with recurrent layers");
}

const char* scheduling_policy_name(SchedulingPolicy policy) {
    switch (policy) {
        case SchedulingPolicy::fcfs: return "fcfs";
        case SchedulingPolicy::priority: return "priority";
        case SchedulingPolicy::fair: return "fair";
    }
    return "?";
}

SchedulingPolicy parse_scheduling_policy(std::string_view name) {
    for (SchedulingPolicy p : {SchedulingPolicy::fcfs, SchedulingPolicy::priority, SchedulingPolicy::fair})
        if (name == scheduling_policy_name(p)) return p;
    fail("unknown scheduling policy '{}' (choose fcfs, priority or fair)", name);
}

Scheduler::Scheduler(SchedulerConfig config, kv::BlockManager& blocks) : config_(config), blocks_(blocks) {
    config_.validate();
    if (config_.recurrent_state)
        for (int32_t slot = config_.max_seqs; slot-- > 0;) free_state_slots_.push_back(slot);  // slot 0 first
    if (config_.state_snapshots > 0 && blocks_.prefix_caching()) {
        std::vector<int32_t> slots;
        for (int32_t i = config_.state_snapshots; i-- > 0;) slots.push_back(config_.max_seqs + i);
        snapshots_ = StateSnapshots(std::move(slots));
        // A snapshot is reachable only through its block: it goes with it.
        blocks_.set_on_evict([this](const kv::EvictedBlock& b) { snapshots_.drop(b.hash); });
    }
}

int64_t Scheduler::plan_snapshots(Sequence* seq, int32_t& restore_slot) {
    restore_slot = -1;
    seq->snapshot_at.clear();
    if (!config_.recurrent_state) return -1;
    // Cached blocks without a snapshot at their end are of no use to a recurrent model.
    if (snapshots_.capacity() == 0 || !seq->reuse_prefix) return 0;
    const std::vector<uint64_t> hashes = blocks_.cached_prefix_hashes(seq->tokens, seq->prefix_key);
    int64_t resume = int64_t(hashes.size());
    while (resume > 0 && snapshots_.find(hashes[size_t(resume - 1)]) < 0) --resume;
    if (resume > 0) restore_slot = snapshots_.find(hashes[size_t(resume - 1)]);
    const int64_t bs = blocks_.block_size();
    if (int64_t(hashes.size()) > resume) seq->snapshot_at.push_back(int64_t(hashes.size()) * bs);
    const int64_t last = blocks_.max_reusable_blocks(seq->tokens);
    if (last > int64_t(hashes.size())) seq->snapshot_at.push_back(last * bs);
    return resume;
}

void Scheduler::take_snapshots(const StepPlan& plan) {
    if (snapshots_.capacity() == 0) return;
    const int64_t bs = blocks_.block_size();
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence* s = c.seq;
        if (s->status != SeqStatus::running || s->state_slot < 0 || !blocks_.has_sequence(s->id)) continue;
        if (std::find(s->snapshot_at.begin(), s->snapshot_at.end(), c.end) == s->snapshot_at.end()) continue;
        const uint64_t hash = blocks_.block_hash(s->id, size_t(c.end / bs - 1));
        if (!blocks_.is_cached_hash(hash)) continue;  // kept private: nothing could reach it
        const int32_t slot = snapshots_.take(hash);
        if (slot >= 0) pending_state_copies_.push_back({s->state_slot, slot});
    }
}

void Scheduler::take_state_slot(Sequence* seq) {
    if (!config_.recurrent_state || seq->state_slot >= 0) return;
    if (free_state_slots_.empty()) fail("scheduler: no free recurrent state slot for sequence {}", seq->id);
    seq->state_slot = free_state_slots_.back();
    free_state_slots_.pop_back();
}

void Scheduler::release_state_slot(Sequence* seq) {
    if (seq->state_slot < 0) return;
    free_state_slots_.push_back(seq->state_slot);
    seq->state_slot = -1;
}

double Scheduler::virtual_time(const Sequence* s, double extra) const {
    auto it = tenants_.find(s->tenant);
    const double served = it == tenants_.end() ? 0 : it->second.served;
    return (served + extra) / s->weight;
}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
    if (config_.policy != SchedulingPolicy::fcfs && a->priority != b->priority) return a->priority < b->priority;
    if (config_.policy == SchedulingPolicy::fair && a->tenant != b->tenant) {
        const double va = virtual_time(a), vb = virtual_time(b);
        if (va != vb) return va < vb;
    }
    if (a->arrival != b->arrival) return a->arrival < b->arrival;
    return a->index < b->index;
}

void Scheduler::activate(Sequence* seq) {
    Tenant& t = tenants_[seq->tenant];
    t.weight = seq->weight;
    if (t.active++ > 0) return;
    // No credit for idle time: start level with the least-served active tenant (0 when none).
    double floor = -1;
    for (const auto& [id, other] : tenants_)
        if (id != seq->tenant && other.active > 0) {
            const double v = other.served / other.weight;
            if (floor < 0 || v < floor) floor = v;
        }
    t.served = floor < 0 ? 0 : floor * t.weight;
}

void Scheduler::deactivate(const Sequence* seq) {
    if (auto it = tenants_.find(seq->tenant); it != tenants_.end() && it->second.active > 0) --it->second.active;
}

void Scheduler::charge(const Sequence* seq, int64_t tokens) {
    Tenant& t = tenants_[seq->tenant];
    t.served += double(tokens);
    t.total += tokens;
}

int64_t Scheduler::served_tokens(uint32_t tenant) const {
    auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.total;
}

std::deque<Sequence*>::iterator Scheduler::next_to_admit(const std::unordered_map<uint32_t, int64_t>& pending) {
    if (config_.policy != SchedulingPolicy::fair || waiting_.size() < 2) return waiting_.begin();
    auto extra = [&](const Sequence* s) {
        auto it = pending.find(s->tenant);
        return it == pending.end() ? 0.0 : double(it->second);
    };
    auto best = waiting_.begin();
    double best_vt = virtual_time(*best, extra(*best));
    for (auto it = std::next(waiting_.begin()); it != waiting_.end(); ++it) {
        const Sequence* s = *it;
        if (s->priority != (*best)->priority) {
            if (s->priority < (*best)->priority) best = it, best_vt = virtual_time(s, extra(s));
            continue;
        }
        const double vt = virtual_time(s, extra(s));
        if (vt < best_vt || (vt == best_vt && ((*it)->arrival < (*best)->arrival ||
                                               ((*it)->arrival == (*best)->arrival && (*it)->index < (*best)->index))))
            best = it, best_vt = vt;
    }
    return best;
}

Sequence* Scheduler::preemption_victim(size_t first) const {
    if (first >= running_.size()) return nullptr;
    if (config_.policy != SchedulingPolicy::fair) return running_.back();  // the newest
    const Sequence* victim = running_.back();
    for (size_t i = running_.size(); i-- > first;) {  // newest first, so ties keep the newest
        const Sequence* s = running_[i];
        if (s->priority != victim->priority) {
            if (s->priority > victim->priority) victim = s;
            continue;
        }
        if (virtual_time(s) > virtual_time(victim)) victim = s;
    }
    return const_cast<Sequence*>(victim);
}

void Scheduler::enqueue(Sequence* seq) {
    seq->status = SeqStatus::waiting;
    auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                                [this](const Sequence* a, const Sequence* b) { return before(a, b); });
    waiting_.insert(pos, seq);
}

void Scheduler::add(Sequence* seq) {
    if (seq->tokens.empty()) fail("scheduler: sequence {} has no tokens", seq->id);
    if (!(seq->weight > 0)) fail("scheduler: sequence {} has weight {}; it must be positive", seq->id, seq->weight);
    seq->n_computed = 0;
    activate(seq);
    enqueue(seq);
}

int32_t Scheduler::seats_in_use() const {
    int32_t n = 0;
    for (const Sequence* s : running_) n += s->seats;
    return n;
}

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
    blocks_.free(seq->id);
    release_state_slot(seq);  // its recompute starts at position 0, from a zeroed state
    seq->snapshot_at.clear();
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
    if (config_.recurrent_state) return false;  // recurrent_prefix_in_flight
    const int64_t reusable = blocks_.max_reusable_blocks(seq->tokens);
    const int64_t cached = blocks_.cached_prefix_blocks(seq->tokens, seq->prefix_key);
    if (cached >= reusable) return false;
    const int64_t bs = blocks_.block_size();
    for (const Sequence* r : running_) {
        if (r->n_computed >= reusable * bs) continue;  // whatever it shares is computed (and cached) already
        if (r->prefix_key != seq->prefix_key) continue;  // another LoRA adapter's KV: never shared, nothing to wait for
        const size_t n = std::min(r->tokens.size(), seq->tokens.size());
        size_t same = 0;
        while (same < n && r->tokens[same] == seq->tokens[same]) ++same;
        const int64_t shared_blocks = std::min(int64_t(same) / bs, reusable);
        if (shared_blocks > cached && r->n_computed < shared_blocks * bs) return true;
    }
    return false;
}

bool Scheduler::recurrent_prefix_in_flight(const Sequence* seq) {
    if (!config_.defer_shared_prefix || !seq->reuse_prefix || snapshots_.capacity() == 0) return false;
    const int64_t bs = blocks_.block_size();
    const int64_t reusable = blocks_.max_reusable_blocks(seq->tokens);
    const std::vector<uint64_t> hashes = blocks_.cached_prefix_hashes(seq->tokens, seq->prefix_key);
    int64_t resume = int64_t(hashes.size());  // where it would resume now
    while (resume > 0 && snapshots_.find(hashes[size_t(resume - 1)]) < 0) --resume;
    bool wait = false;
    for (Sequence* r : running_) {
        if (r->prefix_key != seq->prefix_key || r->state_slot < 0) continue;
        const size_t n = std::min(r->tokens.size(), seq->tokens.size());
        size_t same = 0;
        while (same < n && r->tokens[same] == seq->tokens[same]) ++same;
        const int64_t shared = std::min(int64_t(same) / bs, reusable) * bs;
        if (shared <= resume * bs || r->n_computed >= shared) continue;  // no gain, or r is past it already
        // r snapshots its state where the prompts part, and seq resumes there a step later.
        auto at = std::lower_bound(r->snapshot_at.begin(), r->snapshot_at.end(), shared);
        if (at == r->snapshot_at.end() || *at != shared) r->snapshot_at.insert(at, shared);
        wait = true;
    }
    return wait;
}

int64_t Scheduler::prefill_end(const Sequence* seq, int64_t budget, int64_t& image_budget) const {
    const int64_t begin = seq->n_computed;
    int64_t end = std::min(int64_t(seq->tokens.size()), begin + budget);
    for (int64_t at : seq->snapshot_at)  // a chunk ends where a state snapshot is to be taken
        if (at > begin && at < end) {
            end = at;
            break;
        }
    int64_t image_rows = 0;
    for (const Sequence::ImageRows& image : seq->images) {
        if (image.end <= begin) continue;
        if (image.begin >= end) break;
        const int64_t rows = image.end - std::max(image.begin, begin);
        if (end < image.end || image_rows + rows > image_budget) {
            end = std::max(image.begin, begin);  // stop before it (or, starting inside it, wait)
            break;
        }
        image_rows += rows;
    }
    image_budget -= image_rows;
    return end;
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    plan.state_copies = std::move(pending_state_copies_);
    pending_state_copies_.clear();
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
        Sequence* s = running_[i];  // running_[i..] are not in the plan yet: only they may be preempted
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
            Sequence* victim = preemption_victim(i);
            preempt(victim, plan);
            if (victim == s) {
                self_preempted = true;
                break;
            }
        }
        if (self_preempted) {
            // Under FCFS and priority it was the newest: nothing after it runs. Under fair, those
            // after it (now from index i on) still decode.
            if (config_.policy != SchedulingPolicy::fair) break;
            --i;  // wraps for i == 0; the loop's ++i brings it back
            continue;
        }
        blocks_.append(s->id, std::span<const int32_t>(s->tokens).subspan(size_t(in_kv)), plan.copies);
        if (!s->draft.empty()) blocks_.append(s->id, s->draft, plan.copies);
        const int64_t end = int64_t(s->tokens.size() + s->draft.size());
        plan.chunks.push_back({s, s->n_computed, end, true, int64_t(s->draft.size())});
        plan.n_decode_tokens += end - s->n_computed;
        plan.n_draft_tokens += int64_t(s->draft.size());
        budget -= end - s->n_computed;
    }

    // 2. Continue partly computed prompts, oldest first.
    int64_t image_budget = config_.max_image_tokens;
    for (Sequence* s : prefilling) {
        if (budget <= 0) break;
        if (s->status != SeqStatus::running) continue;  // preempted above
        const int64_t size = int64_t(s->tokens.size());
        const int64_t chunk = prefill_end(s, budget, image_budget) - s->n_computed;
        if (chunk == 0) continue;  // its next image waits for a step with room
        plan.chunks.push_back({s, s->n_computed, s->n_computed + chunk, s->n_computed + chunk == size});
        plan.n_prefill_tokens += chunk;
        budget -= chunk;
    }

    // 3. Admit waiting sequences in queue order (none in a step that had to preempt).
    const int32_t watermark = int32_t(std::ceil(config_.kv_watermark * double(blocks_.n_blocks())));
    int32_t seats = seats_in_use();
    std::unordered_map<uint32_t, int64_t> pending;  // fair: this step's admissions, charged at once
    while (plan.preempted.empty() && budget > 0 && !waiting_.empty()) {
        auto pick = next_to_admit(pending);
        Sequence* s = *pick;
        if (seats + s->seats > config_.max_seqs) break;
        if (config_.recurrent_state && free_state_slots_.empty()) break;  // (the seats already bound them)
        if (s->whole_prompt && int64_t(s->tokens.size()) > budget) break;  // waits for a step with room
        const int32_t reserve = running_.empty() ? 0 : watermark;
        int32_t restore_slot = -1;
        const int64_t max_hits = plan_snapshots(s, restore_slot);
        if (int64_t(blocks_.blocks_needed(s->tokens, s->prefix_key, s->reuse_prefix, max_hits)) + reserve >
            blocks_.num_available_blocks())
            break;
        if (prefix_in_flight(s) || (config_.recurrent_state && recurrent_prefix_in_flight(s))) break;
        int64_t n_tier = 0;
        // The second tier keys blocks by the base model only, so adapter sequences do not use it.
        if (source_ && s->reuse_prefix && s->prefix_key == 0 && blocks_.prefix_caching()) {
            const int64_t first = blocks_.cached_prefix_blocks(s->tokens, 0);
            const int64_t max = blocks_.max_reusable_blocks(s->tokens);
            if (first < max) n_tier = source_->stage(s->tokens, first, max);
        }
        kv::AllocateResult r = blocks_.allocate(s->id, s->tokens, s->prefix_key, s->reuse_prefix, n_tier, max_hits);
        if (r.status != kv::KvStatus::ok) break;
        if (s->whole_prompt) blocks_.keep_private(s->id);
        if (n_tier > 0) source_->load(r.tier_blocks);
        take_state_slot(s);
        if (restore_slot >= 0) {  // after the plan's pending copies: a snapshot taken last step is filled first
            plan.state_copies.push_back({restore_slot, s->state_slot});
            snapshots_.touch(blocks_.block_hash(s->id, size_t(max_hits - 1)));
        }
        waiting_.erase(pick);
        s->n_computed = r.n_cached_tokens;
        if (s->first_cached_tokens < 0) s->first_cached_tokens = r.n_cached_tokens;
        s->status = SeqStatus::running;
        s->admitted = ++admissions_;
        running_.push_back(s);
        seats += s->seats;
        const int64_t size = int64_t(s->tokens.size());
        const int64_t chunk = prefill_end(s, budget, image_budget) - s->n_computed;
        if (chunk == 0) continue;  // admitted; its first image waits for the next step's room
        plan.chunks.push_back({s, s->n_computed, s->n_computed + chunk, s->n_computed + chunk == size});
        plan.n_prefill_tokens += chunk;
        budget -= chunk;
        pending[s->tenant] += chunk;
    }
    plan.n_tokens = plan.n_decode_tokens + plan.n_prefill_tokens;
    // An empty plan does not run: its copies wait for the next (a snapshot must be filled before use).
    if (plan.chunks.empty()) pending_state_copies_ = std::move(plan.state_copies), plan.state_copies.clear();
    return plan;
}

void Scheduler::complete(const StepPlan& plan) {
    for (const ScheduledChunk& c : plan.chunks) {
        if (c.seq->status != SeqStatus::running || !blocks_.has_sequence(c.seq->id)) continue;
        blocks_.mark_computed(c.seq->id, c.end - c.n_draft);
        c.seq->n_computed = c.end - c.n_draft;
        charge(c.seq, c.end - c.begin);  // drafts included: work done for the tenant either way
    }
    take_snapshots(plan);
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
    if (config_.recurrent_state) {
        take_state_slot(child);
        pending_state_copies_.push_back({parent->state_slot, child->state_slot});
    }
    child->n_computed = parent->n_computed;
    child->status = SeqStatus::running;
    child->admitted = ++admissions_;
    child->seats = 1;
    parent->seats = 1;
    running_.push_back(child);
    activate(child);
}

void Scheduler::remove(Sequence* seq) {
    bool held = false;
    if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it), held = true;
    if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it), held = true;
    if (held) deactivate(seq);
    if (blocks_.has_sequence(seq->id)) blocks_.free(seq->id);
    release_state_slot(seq);
    seq->status = SeqStatus::finished;
}

}  // namespace pagoda::engine
