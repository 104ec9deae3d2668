// Drives a StepModel directly, one or a few sequences at a time, without the engine's scheduler:
// `pagoda run`, bench, perplexity, calibration and the forward-pass tests use it. It owns the
// BlockManager for the model's KV cache (StepModelInfo::n_kv_blocks); prompts reuse cached prefix
// blocks (prefix caching), prompt tokens are computed in chunks, and running out of KV blocks is a
// clear error here (the engine preempts instead). For a model whose every layer slides
// (StepModelInfo::sliding_window) the blocks wholly below the window are freed as it goes, as in
// the engine, so a long generation needs only the window's blocks (free_outside_window = false keeps
// them all: the tests' unfreed twin). A prompt may hold images (set_images): their rows take the
// image's embeddings, a chunk never splits an image, and the prefix cache keys the sequence's blocks
// by the images' content hashes too. A model with recurrent layers (StepModelInfo::n_state_slots)
// runs without the prefix cache, each sequence in a state slot of its own until release().
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "kv/block_manager.h"
#include "model/step_model.h"

namespace pagoda::model {

// An image's soft tokens in a prompt: positions [begin, begin + rows), whose token ids are the
// model's image placeholder, take these embeddings (rows x the model's dim, in its embedding
// space) and attend to each other bidirectionally (Gemma 3). `hash` names the image's content.
// With grid_h, grid_w > 0 (Qwen3-VL): rows = grid_h x grid_w merged tokens, row-major, of the
// model's input_embedding_width() values each; the rows stay causal, and every row of the sequence
// gets M-RoPE rotary positions (model/batch.h): text (q, q, q) where q falls behind the position by
// rows - max(grid_h, grid_w) per earlier image, an image's rows (s, s + row, s + column) where s is
// its first row's text rotary position (transformers' get_rope_index).
struct ImageSpan {
    int64_t begin = 0, rows = 0;
    std::vector<float> embeddings;
    uint64_t hash = 0;
    int64_t grid_h = 0, grid_w = 0;
};

class SequenceRunner {
public:
    explicit SequenceRunner(StepModel& model, bool prefix_caching = true, bool free_outside_window = true);

    // Registers `seq` with its prompt and computes the prompt tokens not served by the prefix cache,
    // `chunk` tokens per forward step. Returns the last prompt token's logits, or with all_logits the
    // logits of every computed position (rows for positions cached_tokens()..prompt.size()-1).
    std::vector<float> prefill(kv::SeqId seq, std::span<const int32_t> prompt, int64_t chunk = 512,
                               bool all_logits = false);
    // Appends one token to `seq` and returns its logits.
    std::vector<float> decode(kv::SeqId seq, int32_t token);
    void release(kv::SeqId seq) {
        blocks_.free(seq);
        lora_.erase(seq);
        images_.erase(seq);
        state_slots_.erase(seq);
    }
    // The images of `seq`'s next prefill, increasing and disjoint (checked there against the prompt).
    void set_images(kv::SeqId seq, std::vector<ImageSpan> images) { images_[seq] = std::move(images); }
    // Runs `seq` under a LoRA adapter (before its prefill): its prefix-cache blocks are keyed by the
    // adapter, so they are never shared with the base model's or another adapter's.
    void set_lora(kv::SeqId seq, lora::AdapterRef adapter) { lora_[seq] = std::move(adapter); }

    int64_t last_cached_tokens() const { return last_cached_tokens_; }  // prefix hit of the last prefill
    kv::BlockManager& blocks() { return blocks_; }
    StepModel& model() { return model_; }

private:
    std::vector<float> compute(kv::SeqId seq, int64_t begin, int64_t end, bool all_logits);
    // seq's recurrent state slot (taken on first use; -1: the model keeps no state).
    int32_t state_slot(kv::SeqId seq);
    void check_images(const std::vector<ImageSpan>& images, int64_t prompt_tokens) const;

    StepModel& model_;
    kv::BlockManager blocks_;
    Batch batch_;
    std::vector<kv::BlockCopy> copies_;
    int64_t last_cached_tokens_ = 0;
    std::map<kv::SeqId, lora::AdapterRef> lora_;
    std::map<kv::SeqId, std::vector<ImageSpan>> images_;
    std::map<kv::SeqId, int32_t> state_slots_;
};

}  // namespace pagoda::model
