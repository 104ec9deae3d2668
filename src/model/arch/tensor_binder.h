// Binds a GGUF file's tensors by name to backend uploads for an architecture builder, checking each
// shape (GGUF order: [cols, rows] for a matrix) and naming the tensor in every error.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "model/arch/arch.h"

namespace pagoda::gguf {
struct TensorInfo;
}

namespace pagoda::model {

struct MatrixName {
    std::string name;
    int64_t cols = 0, rows = 0;
};

// A run of rows of a stored matrix (first < 0: `count` zero rows).
struct RowRun {
    int64_t first = 0, count = 0;
};

// A matrix of `cols` columns whose rows are the runs of `t`'s rows (bytes copied, zero rows zero
// bytes: row moves are exact in every block format), kept alive by the model (m.host_buffers).
backend::MatrixSource regrouped(BuiltModel& m, const gguf::File& f, const gguf::TensorInfo& t, int64_t cols,
                                const std::vector<RowRun>& runs, const std::string& name);

class TensorBinder {
public:
    TensorBinder(const gguf::File& file, backend::Backend& backend, BuiltModel& out)
        : file_(file), backend_(backend), out_(out) {}

    bool has(const std::string& name) const;
    // Several matrices of one width stacked by rows into one weight (a single one is a stack of one).
    const backend::Weight& matrix(const std::vector<MatrixName>& parts,
                                  backend::WeightUse use = backend::WeightUse::matmul);
    // One stored matrix [cols, sum of rows] whose row ranges are separate operands (Phi-3's fused
    // attn_qkv and gate|up ffn_up), uploaded as one weight of those parts, named "name[part]".
    const backend::Weight& split_matrix(const std::string& name, int64_t cols,
                                        const std::vector<std::pair<std::string, int64_t>>& parts);
    // Parts of the stored matrix [cols, rows] `name`, each gathered from runs of its rows (bytes copied
    // at load: fused projections that interleave their parts per head group), uploaded as one weight
    // of those parts, named "name[part]".
    const backend::Weight& regrouped_matrix(const std::string& name, int64_t cols, int64_t rows,
                                            const std::vector<std::pair<std::string, std::vector<RowRun>>>& parts);
    const backend::Vector& vector(const std::string& name, int64_t n);
    // A 1-D tensor as host floats.
    std::vector<float> floats(const std::string& name, int64_t n) const;
    // Row `row` of a [cols, rows] matrix as host floats (BERT's token-type row).
    std::vector<float> matrix_row(const std::string& name, int64_t cols, int64_t rows, int64_t row) const;
    const backend::Rope& rope(backend::RopeSpec spec);
    // The tensor `name`, checked to have `shape` (GGUF order), for a builder that regroups its rows.
    const gguf::TensorInfo& tensor(const std::string& name, const std::vector<int64_t>& shape) const;
    // Every value of a tensor of `shape` as host floats, dequantised row by row (ne0 values a row).
    std::vector<float> all_floats(const std::string& name, const std::vector<int64_t>& shape) const;
    // Uploads parts a builder assembled itself (their bytes must live as long as the model:
    // BuiltModel::host_buffers) as one matmul weight.
    const backend::Weight& upload(std::vector<backend::MatrixSource> parts);

private:
    std::vector<float> dequantized(const gguf::TensorInfo& t, const std::string& name, int64_t row, int64_t n) const;

    const gguf::File& file_;
    backend::Backend& backend_;
    BuiltModel& out_;
};

}  // namespace pagoda::model
