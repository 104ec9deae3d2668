#include "model/sequence_runner.h"

#include <algorithm>
#include <array>

#include "core/checksum.h"
#include "core/error.h"
#include "model/mrope_position.h"

namespace pagoda::model {

SequenceRunner::SequenceRunner(StepModel& model, bool prefix_caching, bool free_outside_window)
    // A recurrent state cannot resume from cached KV blocks: no prefix cache for such a model.
    : model_(model),
      blocks_(model.info().n_kv_blocks, model.info().block_size, prefix_caching && model.info().n_state_slots == 0) {
    if (free_outside_window) blocks_.set_sliding_window(model.info().sliding_window);
}

int32_t SequenceRunner::state_slot(kv::SeqId seq) {
    if (model_.info().n_state_slots == 0) return -1;
    if (auto it = state_slots_.find(seq); it != state_slots_.end()) return it->second;
    for (int32_t slot = 0; slot < model_.info().n_state_slots; ++slot) {
        bool used = false;
        for (const auto& [other, s] : state_slots_) used = used || s == slot;
        if (!used) return state_slots_[seq] = slot;
    }
    fail("all {} recurrent state slots are in use: release a sequence first", model_.info().n_state_slots);
}

std::vector<float> SequenceRunner::compute(kv::SeqId seq, int64_t begin, int64_t end, bool all_logits) {
    batch_.clear();
    batch_.block_copies = copies_;
    copies_.clear();
    auto adapter = lora_.find(seq);
    const int32_t s = batch_.add_sequence(blocks_.block_table(seq),
                                          adapter == lora_.end() ? lora::AdapterRef{} : adapter->second, state_slot(seq));
    const auto& tokens = blocks_.tokens(seq);
    const auto images = images_.find(seq);
    const bool mrope = images != images_.end() && has_mrope_grid(std::span<const ImageSpan>(images->second));
    for (int64_t p = begin; p < end; ++p) {
        batch_.add(tokens[size_t(p)], int32_t(p), s, blocks_.slot(seq, p), all_logits || p + 1 == end);
        if (images == images_.end()) continue;
        for (const ImageSpan& image : images->second)
            if (p >= image.begin && p < image.begin + image.rows) {
                const int64_t dim = int64_t(image.embeddings.size()) / image.rows;
                batch_.set_last_row_embedding(std::span(image.embeddings).subspan(size_t((p - image.begin) * dim), size_t(dim)),
                                              int32_t(image.grid_h > 0 ? p : image.begin + image.rows - 1));
            }
        if (mrope) {
            const auto [t, h, w] = mrope_position(p, std::span<const ImageSpan>(images->second));
            batch_.set_rope_position(t, h, w);
        }
    }
    std::vector<float> logits = model_.forward(batch_);
    blocks_.mark_computed(seq, end);
    return logits;
}

void SequenceRunner::check_images(const std::vector<ImageSpan>& images, int64_t prompt_tokens) const {
    if (images.empty()) return;
    if (!model_.info().image_input) fail("this model ({}) takes no image input", model_.info().config.arch);
    const int64_t dim = model_.info().config.input_embedding_width();
    int64_t after = 0;
    for (const ImageSpan& image : images) {
        if (image.rows <= 0 || image.begin < after || image.begin + image.rows > prompt_tokens)
            fail("an image at prompt positions {}..{} is outside the prompt of {} tokens or overlaps another",
                 image.begin, image.begin + image.rows, prompt_tokens);
        if (int64_t(image.embeddings.size()) != image.rows * dim)
            fail("an image's {} embedding floats are not {} rows of the model's width {}", image.embeddings.size(),
                 image.rows, dim);
        if ((image.grid_h > 0 || image.grid_w > 0) && image.grid_h * image.grid_w != image.rows)
            fail("an image of {} rows is not a grid of {} x {} tokens", image.rows, image.grid_h, image.grid_w);
        after = image.begin + image.rows;
    }
}

std::vector<float> SequenceRunner::prefill(kv::SeqId seq, std::span<const int32_t> prompt, int64_t chunk,
                                           bool all_logits) {
    if (prompt.empty()) fail("the prompt is empty: nothing to compute");
    auto adapter = lora_.find(seq);
    uint64_t cache_key = adapter == lora_.end() ? 0 : adapter->second.cache_key();
    const auto images = images_.find(seq);
    const std::vector<ImageSpan> none;
    const std::vector<ImageSpan>& spans = images == images_.end() ? none : images->second;
    check_images(spans, int64_t(prompt.size()));
    // Two prompts with the same placeholder ids but other images must not share KV: the images'
    // places and content hashes join the key of every block of the sequence.
    for (const ImageSpan& image : spans) {
        const uint64_t parts[4] = {cache_key, uint64_t(image.begin), uint64_t(image.rows), image.hash};
        cache_key = checksum64(parts, sizeof parts, 0x1A6E);
    }
    auto result = blocks_.allocate(seq, prompt, cache_key);
    if (result.status != kv::KvStatus::ok)
        fail("the KV cache ({} blocks of {} tokens) cannot hold a {}-token prompt; raise --kv-memory",
             blocks_.n_blocks(), blocks_.block_size(), prompt.size());
    last_cached_tokens_ = result.n_cached_tokens;
    chunk = std::max<int64_t>(1, chunk);
    std::vector<float> logits;
    for (int64_t begin = result.n_cached_tokens, end = 0; begin < int64_t(prompt.size()); begin = end) {
        end = std::min<int64_t>(int64_t(prompt.size()), begin + chunk);
        // An image runs whole in one step: a chunk ends before it, or (an image longer than a chunk,
        // or one the cache served in part: those blocks saw the same image) after it.
        for (const ImageSpan& image : spans)
            if (image.begin < end && end < image.begin + image.rows)
                end = image.begin > begin ? image.begin : image.begin + image.rows;
        std::vector<float> part = compute(seq, begin, end, all_logits);
        if (all_logits) logits.insert(logits.end(), part.begin(), part.end());
        else logits = std::move(part);
    }
    return logits;
}

std::vector<float> SequenceRunner::decode(kv::SeqId seq, int32_t token) {
    const int32_t tokens[1] = {token};
    if (blocks_.append(seq, tokens, copies_) != kv::KvStatus::ok)
        fail("the KV cache ({} blocks of {} tokens) is full after {} tokens; raise --kv-memory", blocks_.n_blocks(),
             blocks_.block_size(), blocks_.num_tokens(seq));
    const int64_t n = blocks_.num_tokens(seq);
    return compute(seq, n - 1, n, false);
}

}  // namespace pagoda::model
