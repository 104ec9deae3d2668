#include "backend/vulkan/vulkan_step_inputs.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

bool buckets_from_env() {
    const char* env = std::getenv("PAGODA_VULKAN_BUCKETS");
    if (!env || !*env) return true;
    const std::string v(env);
    if (v == "1") return true;
    if (v == "0") return false;
    fail("PAGODA_VULKAN_BUCKETS is '{}': it takes 0 (compute each step's own rows) or 1 (pad decode steps to power-of-two buckets)", v);
}

}  // namespace

VulkanStepInputs::VulkanStepInputs(std::shared_ptr<DeviceState> dev) : dev_(std::move(dev)), buckets_(buckets_from_env()) {}

void VulkanStepInputs::ensure(size_t ints) {
    if (buf_.size >= ints * 4 && buf_.buffer) return;
    dev_->stream.flush();
    dev_->ctx->destroy(buf_);
    buf_ = dev_->ctx->create_buffer(std::max<size_t>(ints * 4 * 2, 1 << 16), true, "the step inputs");
}

void VulkanStepInputs::reserve(int64_t max_tokens) { ensure(size_t(max_tokens) * 11 + 4096); }

int64_t VulkanStepInputs::computed(int64_t r) const {
    if (!padded() || r <= 0) return r;
    return std::min<int64_t>(int64_t(std::bit_ceil(uint64_t(r))), capacity_);
}

void VulkanStepInputs::begin(const StepInputs& in) {
    const size_t n = in.tokens.size();
    if (in.positions.size() != n || in.seq_index.size() != n || in.slots.size() != n)
        fail("vulkan begin_step: {} tokens but {} positions, {} sequence indices and {} slots", n, in.positions.size(),
             in.seq_index.size(), in.slots.size());
    if (!in.attend_until.empty() && in.attend_until.size() != n)
        fail("vulkan begin_step: {} attention limits for {} tokens", in.attend_until.size(), n);
    if (!in.attend_from.empty() && in.attend_from.size() != n)
        fail("vulkan begin_step: {} span starts for {} tokens", in.attend_from.size(), n);
    if (!in.token_types.empty() && in.token_types.size() != n)
        fail("vulkan begin_step: {} token types for {} tokens", in.token_types.size(), n);
    if (!in.rope_positions.empty() && in.rope_positions.size() != size_t(kRopeAxes) * n)
        fail("vulkan begin_step: {} rotary positions for {} tokens ({} each)", in.rope_positions.size(), n, kRopeAxes);
    n_tokens_ = int64_t(n);
    capacity_ = in.row_capacity;
    pad_ = buckets_ && capacity_ >= n_tokens_ && n > 0 && n_tokens_ <= kMaxBucketRows && !in.block_tables.empty();
    rows_ = pad_ ? std::min<int64_t>(int64_t(std::bit_ceil(n)), capacity_) : n_tokens_;
    const size_t rows = size_t(rows_);
    // Each per-token input, then its padding (row t >= n: token 0 at position 0 of sequence 0).
    auto padded_copy = [&](std::vector<int32_t>& dst, std::span<const int32_t> src) {
        dst.assign(src.begin(), src.end());
        dst.resize(rows, 0);
    };
    padded_copy(positions, in.positions);
    padded_copy(token_types, in.token_types);  // none given: every token is type 0 (a single text)
    padded_copy(until, in.attend_until.empty() ? in.positions : in.attend_until);
    // The first position of each row's span (an image's start; its own position otherwise):
    // a sliding window reaches back to it (backend/attention_span.h).
    padded_copy(span_starts, in.attend_from.empty() ? in.positions : in.attend_from);
    rope_positions.assign(in.rope_positions.begin(), in.rope_positions.end());
    if (!rope_positions.empty()) rope_positions.resize(rows * size_t(kRopeAxes), 0);
    // A padded gather's extra rows copy the padding rows past the real ones (row i < rows()).
    auto padded_rows = [&](std::vector<int32_t>& dst, std::span<const int32_t> src) {
        dst.assign(src.begin(), src.end());
        const size_t want = size_t(computed(int64_t(src.size())));
        for (size_t i = src.size(); i < want; ++i) dst.push_back(int32_t(i));
    };
    padded_rows(logit_rows, in.logit_rows);
    padded_rows(hidden_rows, in.hidden_rows);
    // Non-causal attention reads each token's sequence's last position in the step instead of its own.
    last_.assign(in.block_tables.size(), -1);
    for (size_t t = 0; t < n; ++t)
        if (size_t(in.seq_index[t]) < last_.size()) last_[size_t(in.seq_index[t])] = std::max(last_[size_t(in.seq_index[t])], in.positions[t]);
    ends.assign(rows, 0);
    for (size_t t = 0; t < n; ++t) ends[t] = size_t(in.seq_index[t]) < last_.size() ? last_[size_t(in.seq_index[t])] : in.positions[t];

    size_t longest = 1;
    for (const auto& table : in.block_tables) longest = std::max(longest, table.size());
    table_stride = uint32_t(std::bit_ceil(longest));
    ensure(11 * rows + in.block_tables.size() * table_stride);
    auto* at = static_cast<int32_t*>(buf_.mapped);
    size_t cursor = 0;
    auto put = [&](std::span<const int32_t> values) {
        const size_t start = cursor;
        std::copy(values.begin(), values.end(), at + cursor);
        cursor += values.size();
        return buf_.address + start * 4;
    };
    tokens_addr = buf_.address;
    std::copy(in.tokens.begin(), in.tokens.end(), at);
    std::fill(at + n, at + rows, 0);
    cursor = rows;
    positions_addr = put(positions);
    token_types_addr = put(token_types);
    // Causal attention reads keys up to each token's attend_until (its position when none is given).
    until_addr = in.attend_until.empty() ? positions_addr : put(until);
    // Attention's per-token triple: its sequence, its own position (ALiBi measures from it, and a
    // sliding window back from it) and its span's start.
    seq_addr = buf_.address + cursor * 4;
    for (size_t t = 0; t < rows; ++t) {
        at[cursor++] = t < n ? in.seq_index[t] : 0;
        at[cursor++] = positions[t];
        at[cursor++] = span_starts[t];
    }
    slots_addr = buf_.address + cursor * 4;
    for (int64_t slot : in.slots) {
        if (slot < 0 || slot > std::numeric_limits<int32_t>::max()) fail("vulkan backend: KV slot {} is outside 0..2^31", slot);
        at[cursor++] = int32_t(slot);
    }
    for (size_t t = n; t < rows; ++t) at[cursor++] = -1;  // a padding row writes no KV
    ends_addr = put(ends);
    tables_addr = buf_.address + cursor * 4;
    for (const auto& table : in.block_tables) {
        std::copy(table.begin(), table.end(), at + cursor);
        std::fill(at + cursor + table.size(), at + cursor + table_stride, 0);
        cursor += table_stride;
    }
}

}  // namespace pagoda::backend::vulkan
