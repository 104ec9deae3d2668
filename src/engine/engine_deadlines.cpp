// EngineCore's start deadlines: a request that has not started by its deadline is never run. It
// finishes at once with an error whose code the server turns into 503 deadline_exceeded, so a
// client that has given up (or would) does not cost the batch its prompt and tokens.
#include <chrono>
#include <fmt/format.h>
#include <vector>

#include "engine/engine_core.h"

namespace pagoda::engine {

void EngineCore::expire_start_deadlines(Clock::time_point now) {
    std::vector<RequestState*> expired;
    for (auto& [id, r] : requests_)
        if (!r->scheduled && r->request.start_deadline && *r->request.start_deadline < now) expired.push_back(r.get());
    for (RequestState* r : expired) {
        const double waited = std::chrono::duration<double>(now - r->arrival).count();
        output_->fail_request(*r, FinishReason::error,
                     fmt::format("the request waited {:.2f} s in the queue and passed its start deadline before it "
                                 "could start; it was not run",
                                 waited),
                     "deadline_exceeded");
        retire(*r);
    }
}

}  // namespace pagoda::engine
