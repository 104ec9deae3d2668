// One forward step's input, as the scheduler hands it to the model: the flattened tokens of every
// sequence scheduled in this step, each with its position, its sequence (an index into
// block_tables), the paged-KV slot its K/V goes to, and whether its logits are wanted (usually only
// a sequence's last token in the step), and whether its final hidden state is wanted (the rows an
// embedding pools). Copy-on-write block copies run before anything is written. Logits and hidden
// states come back for the rows that want them, in batch order.
//
// Recurrent models (StepModelInfo::n_state_slots > 0, the gated DeltaNet layers of qwen35): every
// sequence names its state slot (seq_state), whose state holds exactly its tokens before its first
// row of the step; a sequence whose first row is at position 0 starts from a zeroed state. A fork
// copies its parent's slot into the child's (state_copies, run before the step, after block_copies).
//
// Images (Gemma 3): a row may take a given embedding instead of its token's (an image's soft tokens,
// already in the text model's embedding space: no sqrt(dim) scale applies to them), and may attend
// past its own position up to the last position of its image, so an image's rows see each other
// bidirectionally. Everything else stays causal.
//
// M-RoPE (Qwen3-VL): `positions` stay the KV positions (slots, attention ranges, the causal mask);
// a row may carry separate rotary positions, (temporal, height, width), which a multi-axis RoPE
// reads (backend::RopeSpec::pair_axis). A text row's are (p', p', p') where p' is its rotary
// position; without rope_positions every axis is the row's position.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_manager.h"
#include "lora/adapter.h"

namespace pagoda::model {

struct Batch {
    std::vector<int32_t> tokens;
    std::vector<int32_t> positions;
    std::vector<int32_t> seq_index;    // per token: which entry of block_tables
    std::vector<int64_t> slots;        // per token: KV slot (block_id * block_size + offset)
    std::vector<uint8_t> want_logits;  // 1 where the caller wants this row's logits
    std::vector<uint8_t> want_hidden;  // 1 where the caller wants this row's final hidden state
    std::vector<std::vector<int32_t>> block_tables;  // per sequence: physical block ids in order
    std::vector<kv::BlockCopy> block_copies;         // copy-on-write, executed before the step
    // Per sequence (aligned with block_tables, or empty: none has one): its LoRA adapter and scale.
    std::vector<lora::AdapterRef> seq_lora;
    // Per token (aligned with tokens, or empty: every token is type 0): its token type (segment) id,
    // which an encoder's token-type embedding reads (a cross-encoder's text pair). set_token_type()
    // fills the earlier rows with 0 the first time.
    std::vector<int32_t> token_types;
    // Rows whose input is a given embedding: their batch rows, increasing, and the embeddings,
    // [embedding_rows.size()][model dim], in that order. Models without image input refuse them.
    std::vector<int32_t> embedding_rows;
    std::vector<float> embeddings;
    // Per token, or empty (every row causal): the last position the row's attention reads, >= its
    // own. An image's rows name the image's last position, which must be in this batch (an image
    // runs whole in one step) so its keys are written before they are read.
    std::vector<int32_t> attend_until;
    // Per sequence (aligned with block_tables, or empty: the model keeps no recurrent state): its
    // state slot, below StepModelInfo::n_state_slots.
    std::vector<int32_t> seq_state;
    // Per token backend::kRopeAxes rotary positions (row t's at t * 3), or empty: each row's are its
    // position. set_rope_position() fills the earlier rows with their positions the first time.
    std::vector<int32_t> rope_positions;
    struct StateCopy {
        int32_t src = 0, dst = 0;
    };
    std::vector<StateCopy> state_copies;  // slot src's state into slot dst, before the step

    // Adds a sequence's block table and returns its index for add(); state_slot >= 0 names its
    // recurrent state slot.
    int32_t add_sequence(std::vector<int32_t> block_table, lora::AdapterRef adapter = {}, int32_t state_slot = -1) {
        block_tables.push_back(std::move(block_table));
        if (adapter || !seq_lora.empty()) {
            seq_lora.resize(block_tables.size() - 1);
            seq_lora.push_back(std::move(adapter));
        }
        if (state_slot >= 0 || !seq_state.empty()) {
            seq_state.resize(block_tables.size() - 1, -1);
            seq_state.push_back(state_slot);
        }
        return int32_t(block_tables.size() - 1);
    }
    void add(int32_t token, int32_t position, int32_t seq, int64_t slot, bool logits, bool hidden = false) {
        tokens.push_back(token);
        positions.push_back(position);
        seq_index.push_back(seq);
        slots.push_back(slot);
        want_logits.push_back(logits ? 1 : 0);
        want_hidden.push_back(hidden ? 1 : 0);
        if (!token_types.empty()) token_types.push_back(0);
        if (!attend_until.empty()) attend_until.push_back(position);
        if (!rope_positions.empty()) rope_positions.insert(rope_positions.end(), {position, position, position});
    }
    // Sets the rotary positions (temporal, height, width) of the last added row.
    void set_rope_position(int32_t t, int32_t h, int32_t w) {
        if (rope_positions.empty())
            for (int32_t p : positions) rope_positions.insert(rope_positions.end(), {p, p, p});
        const size_t at = rope_positions.size() - 3;
        rope_positions[at] = t;
        rope_positions[at + 1] = h;
        rope_positions[at + 2] = w;
    }
    // Sets the token type of the last added row.
    void set_token_type(int32_t type) {
        if (type == 0 && token_types.empty()) return;
        token_types.resize(tokens.size(), 0);
        token_types.back() = type;
    }
    // Makes the last added row take `embedding` as its input and attend up to position `last`.
    void set_last_row_embedding(std::span<const float> embedding, int32_t last) {
        embedding_rows.push_back(int32_t(tokens.size() - 1));
        embeddings.insert(embeddings.end(), embedding.begin(), embedding.end());
        if (attend_until.empty()) attend_until.assign(positions.begin(), positions.end());
        attend_until.back() = last;
    }
    void clear() {
        tokens.clear(); positions.clear(); seq_index.clear(); slots.clear(); want_logits.clear();
        want_hidden.clear(); block_tables.clear(); block_copies.clear(); seq_lora.clear();
        token_types.clear();
        embedding_rows.clear(); embeddings.clear(); attend_until.clear(); seq_state.clear(); state_copies.clear();
        rope_positions.clear();
    }
    int64_t size() const { return int64_t(tokens.size()); }
    int64_t n_logit_rows() const {
        int64_t n = 0;
        for (auto w : want_logits) n += w;
        return n;
    }
    int64_t n_hidden_rows() const {
        int64_t n = 0;
        for (auto w : want_hidden) n += w;
        return n;
    }
};

}  // namespace pagoda::model
