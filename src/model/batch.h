// One forward step's input: the flattened tokens of every sequence scheduled in this step, each
// with its position and sequence, and whether its logits are wanted (usually only the last token of
// a sequence's chunk). Logits come back in the order of the rows that want them.
#pragma once
#include <cstdint>
#include <vector>

namespace pagoda::model {

struct Batch {
    std::vector<int32_t> tokens;
    std::vector<int32_t> positions;
    std::vector<int32_t> seq_ids;      // which KV sequence each token belongs to
    std::vector<uint8_t> want_logits;  // 1 where the caller wants this row's logits

    void add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
        tokens.push_back(token);
        positions.push_back(position);
        seq_ids.push_back(seq_id);
        want_logits.push_back(logits ? 1 : 0);
    }
    void clear() { tokens.clear(); positions.clear(); seq_ids.clear(); want_logits.clear(); }
    int64_t size() const { return int64_t(tokens.size()); }
    int64_t n_logit_rows() const {
        int64_t n = 0;
        for (auto w : want_logits) n += w;
        return n;
    }
};

}  // namespace pagoda::model
