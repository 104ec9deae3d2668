#include "engine/batch_builder.h"

#include <algorithm>

#include "engine/prompt_logprobs.h"
#include "model/mrope_position.h"

namespace pagoda::engine {

int64_t build_batch(const StepPlan& plan, const kv::BlockManager& blocks, Clock::time_point step_start,
                 model::Batch& batch) {
    batch.clear();
    batch.block_copies = plan.copies;
    batch.state_copies = plan.state_copies;
    int64_t started = 0;
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence& s = *c.seq;
        const int32_t index = batch.add_sequence(blocks.block_table(s.id),
                                                 s.request ? s.request->request.lora : lora::AdapterRef{}, s.state_slot);
        const bool embeds = s.pooled.has_value();
        const int64_t n_real = int64_t(s.tokens.size());
        const std::vector<PromptImage>* images = s.request ? &s.request->request.images : nullptr;
        // M-RoPE images (with a grid) give every row of the sequence, drafts included, its rotary
        // position, by the same rule SequenceRunner uses.
        const bool mrope = images && model::has_mrope_grid(std::span<const PromptImage>(*images));
        size_t next_image = 0;  // the first image not wholly before p
        for (int64_t p = c.begin; p < c.end; ++p) {
            const int32_t token = p < n_real ? s.tokens[size_t(p)] : s.draft[size_t(p - n_real)];
            // A draft's rows all want logits: row j verifies draft token j, the last one gives the next.
            const bool logits = !embeds && ((c.logits && p + 1 + c.n_draft >= c.end) || wants_prompt_logprob(s, p));
            batch.add(token, int32_t(p), index, blocks.slot(s.id, p), logits,
                      embeds && pools_position(s.request->request.embedding->pooling, p, s.n_prompt));
            if (embeds && p < int64_t(s.request->request.token_types.size()))
                batch.set_token_type(s.request->request.token_types[size_t(p)]);
            if (mrope) {
                const auto [t, h, w] = model::mrope_position(p, std::span<const PromptImage>(*images));
                batch.set_rope_position(t, h, w);
            }
            if (!images) continue;
            while (next_image < images->size() && (*images)[next_image].begin + (*images)[next_image].rows <= p)
                ++next_image;
            if (next_image == images->size() || (*images)[next_image].begin > p) continue;
            // An image row: its embedding, attending to the image's last row (in this step: the
            // scheduler never splits an image), or causal for an M-RoPE image (Qwen3-VL's).
            const PromptImage& image = (*images)[next_image];
            const size_t dim = image.embeddings.size() / size_t(image.rows);
            batch.set_last_row_embedding(std::span(image.embeddings).subspan(size_t(p - image.begin) * dim, dim),
                                         int32_t(image.grid_h > 0 ? p : image.begin + image.rows - 1));
        }
        if (s.request && !s.request->scheduled) {
            s.request->scheduled = true;
            ++started;
            s.request->timings.queue = seconds_between(s.request->arrival, step_start);
            s.request->usage.cached_prompt_tokens = std::max<int64_t>(0, s.first_cached_tokens);
        }
    }
    return started;
}

std::vector<RequestState*> requests_in(const StepPlan& plan) {
    std::vector<RequestState*> requests;
    for (const ScheduledChunk& c : plan.chunks)
        if (c.seq->request && std::find(requests.begin(), requests.end(), c.seq->request) == requests.end())
            requests.push_back(c.seq->request);
    return requests;
}

}  // namespace pagoda::engine
