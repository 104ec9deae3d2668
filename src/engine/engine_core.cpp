#include "engine/engine_core.h"

#include <algorithm>

#include "core/checksum.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/batch_builder.h"
#include "engine/embedding_output.h"
#include "engine/request_validation.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

int64_t limit_for(const model::StepModelInfo& info, const EngineOptions& options) {
    int64_t limit = int64_t(info.n_kv_blocks) * info.block_size;
    if (info.max_context > 0) limit = std::min(limit, info.max_context);
    if (options.max_context > 0) limit = std::min(limit, options.max_context);
    return limit;
}

// A model with recurrent layers (n_state_slots > 0) keeps a per-sequence state that folds in every
// token in order: the scheduler gives each running sequence a slot (at most the model's slots run at
// once), the prefix cache resumes only where a state snapshot was taken (the slots left over hold
// them; with none left the cache is off), its second tier is off (a tier block carries no state) and
// speculative drafts are refused (a refused draft's tokens cannot be taken back out of the state).
EngineOptions fit_to_model(EngineOptions o, const model::StepModelInfo& info) {
    if (info.n_state_slots <= 0) return o;
    if (o.speculative.enabled())
        fail("engine: speculative decoding is not supported for a model with recurrent layers ({}): its state "
             "cannot take back a refused draft", info.config.arch);
    if (o.state_snapshots < 0) fail("engine: state_snapshots must not be negative, got {}", o.state_snapshots);
    if (o.prefix_tier.enabled())
        log_info("engine: the prefix cache's second tier is off for this model: its blocks carry no recurrent state");
    o.prefix_tier = {};
    o.scheduler.recurrent_state = true;
    if (o.scheduler.max_seqs > info.n_state_slots) {
        log_info("engine: {} sequences run at once (the model's recurrent state slots), not {}", info.n_state_slots,
                 o.scheduler.max_seqs);
        o.scheduler.max_seqs = info.n_state_slots;
    }
    o.scheduler.state_snapshots =
        o.prefix_caching ? std::min(o.state_snapshots, info.n_state_slots - o.scheduler.max_seqs) : 0;
    if (o.prefix_caching && o.scheduler.state_snapshots == 0) {
        log_info("engine: prefix caching is off for this model: no state slot is left for snapshots of its recurrent "
                 "layers' state (--state-snapshots)");
        o.prefix_caching = false;
    } else if (o.prefix_caching) {
        log_info("engine: prefix cache with up to {} recurrent-state snapshots (state slots {} to {})",
                 o.scheduler.state_snapshots, o.scheduler.max_seqs, o.scheduler.max_seqs + o.scheduler.state_snapshots - 1);
    }
    return o;
}

}  // namespace

EngineCore::EngineCore(model::StepModel& model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer, EngineOptions options)
    : model_(model),
      info_(model.info()),
      tokenizer_(std::move(tokenizer)),
      options_(fit_to_model(std::move(options), info_)),
      context_limit_(limit_for(info_, options_)),
      blocks_(info_.n_kv_blocks, info_.block_size, options_.prefix_caching),
      scheduler_(options_.scheduler, blocks_) {
    if (info_.vocab_size < 1) fail("engine: the model reports an empty vocabulary");
    blocks_.set_sliding_window(info_.sliding_window);  // frees blocks outside every layer's window
    if (options_.max_context < 0) fail("engine: max_context must not be negative, got {}", options_.max_context);
    options_.speculative.validate();
    if (tokenizer_ && tokenizer_->n_vocab() > info_.vocab_size)
        fail("engine: the tokenizer has {} tokens but the model's vocabulary only {}", tokenizer_->n_vocab(),
             info_.vocab_size);
    if (options_.prefix_tier.enabled()) {
        tier_ = std::make_unique<PrefixTierLink>(model_, blocks_, options_.prefix_tier);
        scheduler_.set_prefix_source(tier_.get());
    }
    speculation_ = std::make_unique<SpeculationController>(options_.speculative, model_, tokenizer_.get(),
                                                           context_limit_, scheduler_, counters_);
    output_ = std::make_unique<OutputProcessor>(
        info_.vocab_size, context_limit_, tokenizer_.get(), scheduler_, *speculation_, counters_,
        options_.on_request_finished, [this](RequestState& r, Sequence& parent) { fork_request(r, parent); });
}

EngineCore::~EngineCore() {
    if (!tier_ || !tier_->stats().has_file) return;
    try {
        // What is still cached in the pool would be lost with the process: keep it for the next one.
        const auto start = Clock::now();
        if (const int64_t n = tier_->persist_pool(); n > 0)
            log_info("prefix cache dir: wrote {} cached blocks from the pool in {:.2f} s", n,
                     seconds_between(start, Clock::now()));
    } catch (const std::exception& e) {
        log_warn("prefix cache dir: could not write the pool's cached blocks: {}", e.what());
    }
}

void EngineCore::validate(const Request& req) const {
    validate_request(req, info_, context_limit_, scheduler_.config().max_seqs, tokenizer_ != nullptr);
    // An encoder's text runs in one step (bidirectional attention sees it whole): it must fit the budget.
    if (info_.bidirectional && int64_t(req.prompt.size()) > scheduler_.config().max_batched_tokens)
        fail("the input has {} tokens, more than the {} an encoder step takes (it runs a text in one step; raise "
             "--max-batched-tokens)", req.prompt.size(), scheduler_.config().max_batched_tokens);
    // An image runs whole in one step, so it must fit one step's image-token bound.
    const int64_t step_images = std::min(scheduler_.config().max_image_tokens, scheduler_.config().max_batched_tokens);
    for (const PromptImage& image : req.images)
        if (image.rows > step_images)
            fail("an image of {} tokens is more than the {} image tokens one step takes (an image runs whole in one "
                 "step; raise --max-image-tokens or --max-batched-tokens)", image.rows, step_images);
}

Sequence& EngineCore::new_sequence(RequestState& r, int32_t index, std::vector<int32_t> tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_seq_id_++;
    seq->request = &r;
    seq->index = index;
    seq->tokens = std::move(tokens);
    seq->n_prompt = int64_t(r.request.prompt.size());
    seq->priority = r.request.priority;
    seq->tenant = r.request.tenant;
    seq->weight = r.request.weight;
    seq->prefix_key = r.request.lora.cache_key();
    // Two prompts with the same placeholder ids but other images must not share KV: the images'
    // places and content hashes (and an M-RoPE image's grid, which places its rows) join the key of
    // every block of the sequence.
    for (const PromptImage& image : r.request.images) {
        const uint64_t parts[4] = {seq->prefix_key, uint64_t(image.begin), uint64_t(image.rows), image.hash};
        seq->prefix_key = checksum64(parts, sizeof parts, 0x1A6E);
        if (image.grid_w > 0) seq->prefix_key = checksum64(&image.grid_w, sizeof image.grid_w, seq->prefix_key);
        seq->images.push_back({image.begin, image.begin + image.rows});
    }
    seq->arrival = r.seqs.empty() ? next_arrival_++ : r.seqs[0]->arrival;
    // Keyed by (seed, choice index, position): each choice its own stream (sampler.h).
    seq->sampler = std::make_unique<Sampler>(r.request.sampling, uint64_t(index));
    seq->text = TextStream(tokenizer_.get());
    seq->stop = StopMatcher(r.request.stop.stop, r.request.stop.include_stop_str);
    if (r.request.grammar) seq->matcher.emplace(r.request.grammar);
    if (const auto& t = r.request.thinking) seq->thinking.emplace(*t, tag_tokens(*tokenizer_, t->close));
    if (const auto& e = r.request.embedding) {
        // The last token is always computed; an encoder's KV depends on the whole text, so it is
        // neither reused nor shared, and the text runs in one step.
        seq->reuse_prefix = e->pooling == Pooling::last && !info_.bidirectional;
        seq->whole_prompt = info_.bidirectional;
        seq->pooled.emplace(*e, seq->n_prompt, info_.hidden_size);
    }
    if (r.request.prompt_logprobs >= 0) seq->reuse_prefix = false;  // a cached row has no logits
    r.seqs.push_back(std::move(seq));
    return *r.seqs.back();
}

void EngineCore::add(RequestId id, Request request, std::shared_ptr<DeltaQueue> queue, DeltaCallback callback,
                     Clock::time_point arrival) {
    validate(request);
    if (requests_.count(id)) fail("engine: request id {} is already in use", id);
    auto r = std::make_unique<RequestState>();
    r->id = id;
    r->request = std::move(request);
    r->queue = std::move(queue);
    r->callback = std::move(callback);
    r->choice_done.assign(size_t(r->request.n), 0);
    r->prompt_logprobs_sent.assign(size_t(r->request.n), 0);
    r->arrival = arrival;
    r->usage.prompt_tokens = int64_t(r->request.prompt.size());
    if (r->request.grammar) r->masker = maskers_.masker_for(r->request, *tokenizer_);
    Sequence& first = new_sequence(*r, 0, r->request.prompt);
    first.seats = r->request.n;
    counters_.prompt_tokens += r->usage.prompt_tokens;
    scheduler_.add(&first);
    requests_.emplace(id, std::move(r));
}

void EngineCore::retire(RequestState& r) { requests_.erase(r.id); }

bool EngineCore::cancel(RequestId id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return false;
    output_->fail_request(*it->second, FinishReason::cancelled, "cancelled");
    retire(*it->second);
    return true;
}

void EngineCore::abort_all(const std::string& message) {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : requests_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (RequestId id : ids) {
        RequestState& r = *requests_.at(id);
        output_->fail_request(r, message.empty() ? FinishReason::cancelled : FinishReason::error,
                     message.empty() ? "cancelled" : message);
        retire(r);
    }
}

void EngineCore::fork_request(RequestState& r, Sequence& parent) {
    r.forked = true;
    for (int32_t i = 1; i < r.request.n; ++i) {
        Sequence& child = new_sequence(r, i, parent.tokens);
        child.first_cached_tokens = parent.first_cached_tokens;
        scheduler_.fork(&parent, &child);
    }
}

bool EngineCore::step() {
    const auto start = Clock::now();
    expire_start_deadlines(start);
    const bool backlogged = scheduler_.num_waiting() > 0;
    if (speculation_->enabled()) speculation_->propose();
    const int64_t generated_before = counters_.generation_tokens;
    StepPlan plan = scheduler_.schedule();
    counters_.preemptions = scheduler_.preemptions();
    if (plan.empty()) return false;

    const int64_t started = build_batch(plan, blocks_, start, batch_);
    if (on_planned_) on_planned_();  // stats now show this step's sequences as running

    std::vector<float> logits;
    if (!run_forward(plan, logits)) return false;
    scheduler_.complete(plan);
    ++counters_.steps;
    counters_.step_tokens += plan.n_tokens;
    counters_.computed_prompt_tokens += plan.n_prefill_tokens;
    counters_.max_step_tokens = std::max(counters_.max_step_tokens, plan.n_tokens);

    std::vector<RequestState*> done;
    pool_hidden_rows(plan, model_.hidden_rows(), info_.hidden_size, *output_, done);
    const OutputProcessor::Verified verified = output_->sample_step(plan, logits, done);
    for (RequestState* r : done) retire(*r);

    const double step_seconds = seconds_between(start, Clock::now());
    counters_.step_seconds += step_seconds;
    start_rate_.observe(step_seconds, started, backlogged);
    if (options_.on_step) {
        StepInfo info{plan.n_tokens, plan.n_decode_tokens, plan.n_prefill_tokens, int64_t(plan.chunks.size()),
                      verified.drafted, verified.accepted, step_seconds, counters_.generation_tokens - generated_before};
        options_.on_step(info);
    }
    return true;
}

bool EngineCore::run_forward(const StepPlan& plan, std::vector<float>& logits) {
    try {
        const auto forward_start = Clock::now();
        logits = model_.forward(batch_);
        if (speculation_->enabled() && plan.n_prefill_tokens == 0)  // decode steps teach the cost model
            speculation_->observe_step(seconds_between(forward_start, Clock::now()), plan.n_tokens,
                                       int64_t(plan.chunks.size()));
        const size_t want = size_t(batch_.n_logit_rows()) * size_t(info_.vocab_size);
        if (logits.size() != want)
            fail("the model returned {} logits, expected {} ({} rows of {})", logits.size(), want,
                 batch_.n_logit_rows(), info_.vocab_size);
        const size_t want_hidden = size_t(batch_.n_hidden_rows()) * size_t(info_.hidden_size);
        if (want_hidden && model_.hidden_rows().size() != want_hidden)
            fail("the model returned {} hidden-state values, expected {} ({} rows of {})", model_.hidden_rows().size(),
                 want_hidden, batch_.n_hidden_rows(), info_.hidden_size);
        return true;
    } catch (const model::StepInterrupted&) {
        scheduler_.drop_state_snapshots();
        // The engine is being stopped: the batch's requests end as cancelled, not failed, and their
        // half-written KV goes with their blocks.
        fail_batch(plan, FinishReason::cancelled, "cancelled");
    } catch (const std::exception& e) {
        scheduler_.drop_state_snapshots();  // the step's snapshot copies may not have run
        log_error("engine: forward step over {} tokens failed: {}", batch_.size(), e.what());
        fail_batch(plan, FinishReason::error, fmt::format("model step failed: {}", e.what()));
    }
    return false;
}

void EngineCore::fail_batch(const StepPlan& plan, FinishReason reason, const std::string& error) {
    for (RequestState* r : requests_in(plan)) {
        output_->fail_request(*r, reason, error);
        retire(*r);
    }
}

EngineStats EngineCore::stats() const {
    EngineStats s = counters_;
    s.preemptions = scheduler_.preemptions();
    s.running_sequences = int64_t(scheduler_.num_running());
    s.waiting_sequences = int64_t(scheduler_.num_waiting());
    s.start_rate = start_rate_.rate().value_or(0.0);
    // The snapshot is taken every step: gather adapters by pointer (no string copies), and copy
    // each distinct adapter's name once (at most --max-loras of them).
    std::vector<const lora::Adapter*> adapters[2];  // [0] waiting, [1] running
    for (const auto& [id, r] : requests_) {
        bool running = false;
        for (const auto& seq : r->seqs) running = running || seq->status == SeqStatus::running;
        ++(running ? s.running_requests : s.waiting_requests);
        if (r->request.lora) adapters[running].push_back(r->request.lora.adapter.get());
    }
    for (int running : {0, 1}) {
        auto& list = adapters[running];
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
        auto& names = running ? s.running_lora_adapters : s.waiting_lora_adapters;
        for (const auto* a : list) names.push_back(a->name);
        std::sort(names.begin(), names.end());  // distinct adapters have distinct names
    }
    s.kv_blocks_total = blocks_.n_blocks();
    s.prefix_caching = blocks_.prefix_caching();
    s.kv_blocks_used = blocks_.num_used_blocks();
    s.kv_blocks_cached = blocks_.num_evictable_blocks();
    s.kv_usage = double(s.kv_blocks_used) / double(s.kv_blocks_total);
    s.prefix_queried_tokens = blocks_.stats().queried_tokens;
    s.prefix_hit_tokens = blocks_.stats().hit_tokens;
    const StateSnapshots& snapshots = scheduler_.state_snapshots();
    s.state_snapshot_slots = snapshots.capacity();
    s.state_snapshots = snapshots.size();
    s.state_snapshots_taken = snapshots.taken();
    s.state_snapshot_restores = snapshots.restored();
    if (tier_) {
        copy_tier_stats(tier_->stats(), s);
        s.tier_hit_tokens = blocks_.stats().tier_hit_tokens;
        s.tier_file_capacity_bytes = int64_t(options_.prefix_tier.dir_bytes);
    }
    return s;
}

}  // namespace pagoda::engine
