#include "engine/embedding_output.h"

#include <fmt/format.h>

namespace pagoda::engine {

void pool_hidden_rows(const StepPlan& plan, const std::vector<float>& hidden, int64_t hidden_size,
                      OutputProcessor& output, std::vector<RequestState*>& done) {
    size_t row = 0;  // hidden rows come in batch order: chunk by chunk, position by position
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence& s = *c.seq;
        if (!s.pooled) continue;
        RequestState& r = *s.request;
        const Pooling pooling = r.request.embedding->pooling;
        for (int64_t p = c.begin; p < c.end; ++p) {
            if (!pools_position(pooling, p, s.n_prompt)) continue;
            const float* values = hidden.data() + row++ * size_t(hidden_size);
            if (s.status == SeqStatus::running) s.pooled->add(p, values);
        }
        if (s.status != SeqStatus::running || c.end != s.n_prompt) continue;
        Delta d;
        d.index = 0;
        try {
            d.embedding = s.pooled->result();
        } catch (const std::exception& e) {
            output.fail_request(r, FinishReason::error, fmt::format("pooling failed: {}", e.what()));
            done.push_back(&r);
            continue;
        }
        output.finish_sequence(s, FinishReason::stop, d);
        done.push_back(&r);
    }
}

}  // namespace pagoda::engine
