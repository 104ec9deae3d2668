// Helpers for tests that drive a Backend through its interface: random weights in any storage type,
// a backend with a bump allocator over its arena, one step's inputs over paged block tables, and
// comparisons of host float outputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/half.h"
#include "quant/quantize.h"

namespace pagoda::backend::testing {

inline std::vector<float> random_values(int64_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    return x;
}

// A matrix in host memory in a GGML storage type: random floats rounded (F16, BF16) or quantised.
struct HostMatrix {
    gguf::GgmlType type = gguf::GgmlType::F32;
    int64_t rows = 0, cols = 0;
    std::string name;
    std::vector<uint8_t> bytes;
    MatrixSource source() const { return {type, bytes.data(), rows, cols, name}; }
};

inline HostMatrix random_matrix(gguf::GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng,
                                std::string name = "w") {
    const uint64_t row_bytes = *gguf::row_size(type, cols);
    HostMatrix m{type, rows, cols, std::move(name), std::vector<uint8_t>(size_t(row_bytes * uint64_t(rows)))};
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row = random_values(cols, rng, 0.5f);
        uint8_t* out = m.bytes.data() + uint64_t(r) * row_bytes;
        if (type == gguf::GgmlType::F32) {
            std::memcpy(out, row.data(), row_bytes);
        } else if (type == gguf::GgmlType::F16 || type == gguf::GgmlType::BF16) {
            for (int64_t c = 0; c < cols; ++c) {
                const uint16_t h = type == gguf::GgmlType::F16 ? f32_to_f16(row[size_t(c)]) : f32_to_bf16(row[size_t(c)]);
                std::memcpy(out + 2 * c, &h, 2);
            }
        } else {
            quant::quantize_row(type, row.data(), out, cols);
        }
    }
    return m;
}

// A backend and a bump allocator over its arena (reserved once, so tensors stay valid).
class Side {
public:
    static constexpr int64_t kMaxTokens = 4096;  // the most tokens any test step has
    explicit Side(std::unique_ptr<Backend> backend, size_t capacity = size_t(1) << 21)
        : backend_(std::move(backend)), capacity_(capacity) {
        backend_->reserve_activations(capacity_ * backend_->activation_size(), kMaxTokens);
    }
    Backend& operator*() { return *backend_; }
    Backend* operator->() { return backend_.get(); }

    void reset() { used_ = 0; }  // every tensor handed out so far is free again
    Tensor tensor(int64_t rows, int64_t cols) {
        const size_t n = size_t(rows * cols);
        if (used_ + n > capacity_) throw std::runtime_error("test arena too small");
        Tensor t{static_cast<uint8_t*>(backend_->activations()) + used_ * backend_->activation_size(), rows, cols};
        used_ += n;
        return t;
    }
    Tensor input(int64_t rows, int64_t cols, const std::vector<float>& values) {
        Tensor t = tensor(rows, cols);
        backend_->write(t, values.data());
        return t;
    }
    std::vector<float> read(const Tensor& t) const {
        std::vector<float> out(size_t(t.rows * t.cols));
        backend_->read(t, out.data());
        return out;
    }

private:
    std::unique_ptr<Backend> backend_;
    size_t capacity_, used_ = 0;
};

// One step's inputs over paged block tables. make_tables() gives sequence i a table for lengths[i]
// tokens out of shuffled block ids (so tables are scattered, and some blocks nobody owns);
// add_tokens() puts positions [from, to) of a sequence into the step, the last one wanting logits.
struct Step {
    std::vector<int32_t> tokens, positions, seq_index, logit_rows, hidden_rows;
    std::vector<int64_t> slots;
    std::vector<std::vector<int32_t>> block_tables;
    std::vector<int32_t> spare_blocks;  // in the cache, in no table
    std::vector<int32_t> attend_until;  // per token, or empty (StepInputs::attend_until)
    std::vector<int32_t> attend_from;   // per token, or empty (StepInputs::attend_from)
    int32_t block_size = 1, n_blocks = 0;

    StepInputs inputs() const {
        return {tokens, positions, seq_index, slots, logit_rows, block_tables, hidden_rows, {}, attend_until, attend_from};
    }
    int64_t n_tokens() const { return int64_t(tokens.size()); }

    void add_tokens(int32_t seq, int32_t from, int32_t to) {
        const auto& table = block_tables[size_t(seq)];
        for (int32_t p = from; p < to; ++p) {
            tokens.push_back(0);
            positions.push_back(p);
            seq_index.push_back(seq);
            slots.push_back(int64_t(table[size_t(p / block_size)]) * block_size + p % block_size);
        }
        if (to > from) logit_rows.push_back(int32_t(tokens.size()) - 1);
    }
};

inline Step make_tables(const std::vector<int32_t>& lengths, int32_t block_size, std::mt19937& rng) {
    Step s;
    s.block_size = block_size;
    for (int32_t len : lengths) s.n_blocks += (len + block_size - 1) / block_size;
    s.n_blocks += 2;
    std::vector<int32_t> ids(size_t(s.n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    auto next = ids.begin();
    for (int32_t len : lengths) {
        const auto n = (len + block_size - 1) / block_size;
        s.block_tables.emplace_back(next, next + n);
        next += n;
    }
    s.spare_blocks.assign(next, ids.end());
    return s;
}

// max |got - want| <= rel_tol * max |want|.
inline ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double rel_tol) {
    if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " values, expected " << want.size();
    double err = 0, scale = 0;
    size_t worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(double(got[i]) - want[i]);
        if (std::isnan(e)) return ::testing::AssertionFailure() << "value " << i << " is NaN";
        if (e > err) err = e, worst = i;
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    if (err <= rel_tol * scale) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "max error " << err << " at " << worst << " (got " << got[worst] << ", want "
                                         << want[worst] << ") exceeds " << rel_tol << " x max|want| " << scale;
}

inline ::testing::AssertionResult bitwise(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " values, expected " << want.size();
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
            return ::testing::AssertionFailure() << "value " << i << ": " << got[i] << " vs " << want[i];
    return ::testing::AssertionSuccess();
}

}  // namespace pagoda::backend::testing
