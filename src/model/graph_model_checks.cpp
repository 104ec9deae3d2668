// GraphModel's checks of a batch before a step (StepModel::forward's contract): every field in
// range for this model's vocabulary, KV pool, recurrent state slots and image input, so the
// backend's begin_step receives only valid inputs and a bad batch is refused naming what is wrong.
#include <algorithm>

#include "core/error.h"
#include "kv/block_manager.h"
#include "model/graph_model.h"

namespace pagoda::model {

void GraphModel::validate(const Batch& batch) const {
    const int64_t n = batch.size();
    if (int64_t(batch.positions.size()) != n || int64_t(batch.seq_index.size()) != n ||
        int64_t(batch.slots.size()) != n || int64_t(batch.want_logits.size()) != n ||
        (!batch.want_hidden.empty() && int64_t(batch.want_hidden.size()) != n))
        fail("malformed batch: field lengths differ");
    const int32_t block_size = cache_->layout().block_size;
    for (int64_t t = 0; t < n; ++t) {
        if (batch.tokens[t] < 0 || batch.tokens[t] >= config_.vocab_size)
            fail("token id {} is outside the vocabulary of {} tokens", batch.tokens[t], config_.vocab_size);
        if (batch.seq_index[t] < 0 || batch.seq_index[t] >= int64_t(batch.block_tables.size()))
            fail("token {} names sequence {} but the batch has {} block tables", t, batch.seq_index[t],
                 batch.block_tables.size());
        const auto& table = batch.block_tables[size_t(batch.seq_index[t])];
        const int64_t pos = batch.positions[t];
        if (pos < 0 || pos >= int64_t(table.size()) * block_size)
            fail("position {} is outside its sequence's {} KV blocks", pos, table.size());
        if (batch.slots[t] < 0 || batch.slots[t] >= cache_->n_slots())
            fail("KV slot {} is outside the pool of {} slots", batch.slots[t], cache_->n_slots());
    }
    for (const auto& table : batch.block_tables)
        for (int32_t b : table) {
            if (b == kv::BlockManager::kFreedBlock && window_ > 0) continue;  // checked per token below
            if (b < 0 || b >= cache_->n_blocks()) fail("block id {} is outside the pool of {} blocks", b, cache_->n_blocks());
        }
    if (window_ > 0)  // a freed block must lie wholly below the window of every token that reads the table
        for (int64_t t = 0; t < n; ++t) {
            const auto& table = batch.block_tables[size_t(batch.seq_index[t])];
            const int64_t lo = std::max<int64_t>(0, int64_t(batch.positions[t]) - window_ + 1);
            for (int64_t i = lo / block_size; i <= batch.positions[t] / block_size; ++i)
                if (table[size_t(i)] == kv::BlockManager::kFreedBlock)
                    fail("position {} reads block {} of its table, which was freed", batch.positions[t], i);
        }
    if (!lora_step_)
        for (const auto& ref : batch.seq_lora)
            if (ref) fail("the batch names LoRA adapter '{}' but the model was opened without LoRA support", ref.adapter->name);
    validate_image_rows(batch);
    for (const auto& c : batch.block_copies)
        if (c.src < 0 || c.src >= cache_->n_blocks() || c.dst < 0 || c.dst >= cache_->n_blocks())
            fail("block copy {} -> {} is outside the pool", c.src, c.dst);
    validate_state(batch);
}

void GraphModel::validate_state(const Batch& batch) const {
    const int64_t slots = built_.graph.state_slots;
    if (slots == 0) {
        if (!batch.seq_state.empty() || !batch.state_copies.empty())
            fail("the batch names recurrent state slots but this model ({}) keeps no recurrent state", config_.arch);
        return;
    }
    if (batch.seq_state.size() != batch.block_tables.size())
        fail("malformed batch: {} state slots for {} sequences (this model's recurrent layers need one per sequence)",
             batch.seq_state.size(), batch.block_tables.size());
    std::vector<int64_t> held = slot_tokens_;  // what each slot holds once the copies ran
    for (const auto& c : batch.state_copies) {
        if (c.src < 0 || c.src >= slots || c.dst < 0 || c.dst >= slots || c.src == c.dst)
            fail("state copy {} -> {} is outside the {} state slots", c.src, c.dst, slots);
        held[size_t(c.dst)] = held[size_t(c.src)];
    }
    std::vector<int32_t> next(batch.block_tables.size(), -1);  // per sequence: its next position in the step
    std::vector<int32_t> owner(size_t(slots), -1);
    for (int64_t t = 0; t < batch.size(); ++t) {
        const auto s = size_t(batch.seq_index[size_t(t)]);
        const int32_t slot = batch.seq_state[s], pos = batch.positions[size_t(t)];
        if (slot < 0 || slot >= slots) fail("sequence {} names state slot {}, outside the {} slots", s, slot, slots);
        if (owner[size_t(slot)] >= 0 && owner[size_t(slot)] != int32_t(s))
            fail("sequences {} and {} of the batch share state slot {}", owner[size_t(slot)], s, slot);
        owner[size_t(slot)] = int32_t(s);
        if (next[s] < 0) {  // the sequence's first row: the state must hold exactly the tokens before it
            if (pos != 0 && held[size_t(slot)] != pos)
                fail("sequence {} continues at position {} but its state slot {} holds {} tokens (a recurrent state "
                     "cannot skip or rewind tokens)", s, pos, slot, held[size_t(slot)] < 0 ? 0 : held[size_t(slot)]);
        } else if (pos != next[s]) {
            fail("sequence {}: position {} follows position {} (a recurrent model's rows run in order)", s, pos,
                 next[s] - 1);
        }
        next[s] = pos + 1;
    }
}

void GraphModel::validate_image_rows(const Batch& batch) const {
    const int64_t n = batch.size();
    if (!batch.attend_until.empty() && int64_t(batch.attend_until.size()) != n)
        fail("malformed batch: {} attention limits for {} tokens", batch.attend_until.size(), n);
    if (!batch.rope_positions.empty() && int64_t(batch.rope_positions.size()) != 3 * n)
        fail("malformed batch: {} rotary positions for {} tokens (3 each)", batch.rope_positions.size(), n);
    for (int32_t p : batch.rope_positions)
        if (p < 0) fail("malformed batch: a negative rotary position {}", p);
    if (batch.embedding_rows.empty() && batch.attend_until.empty()) return;
    if (!info_.image_input) fail("this model ({}) takes no image input", config_.arch);
    if (batch.embeddings.size() != batch.embedding_rows.size() * size_t(config_.input_embedding_width()))
        fail("malformed batch: {} embedding floats for {} rows of {}", batch.embeddings.size(),
             batch.embedding_rows.size(), config_.input_embedding_width());
    for (size_t i = 0; i < batch.embedding_rows.size(); ++i)
        if (batch.embedding_rows[i] < 0 || batch.embedding_rows[i] >= n ||
            (i > 0 && batch.embedding_rows[i] <= batch.embedding_rows[i - 1]))
            fail("malformed batch: embedding rows must be increasing rows below {}", n);
    for (int64_t t = 0; t < int64_t(batch.attend_until.size()); ++t) {
        const int32_t until = batch.attend_until[size_t(t)], pos = batch.positions[size_t(t)];
        if (until == pos) continue;
        if (until < pos) fail("row {} at position {} attends only up to position {}", t, pos, until);
        // The keys up to `until` are written in this step: the sequence has a row there.
        bool present = false;
        for (int64_t u = 0; u < n && !present; ++u)
            present = batch.seq_index[size_t(u)] == batch.seq_index[size_t(t)] && batch.positions[size_t(u)] == until;
        if (!present) fail("row {} attends up to position {}, which is not in this step (an image runs whole in one step)", t, until);
        // Sliding layers: the backends count the window back from the row's own position and reach
        // to its image's start (backend/attention_span.h), so an image may lie anywhere.
    }
}

}  // namespace pagoda::model
