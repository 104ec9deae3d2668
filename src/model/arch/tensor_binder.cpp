#include "model/arch/tensor_binder.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"
#include "gguf/gguf.h"
#include "quant/dequantize.h"

namespace pagoda::model {
namespace {

std::string shape_string(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

const gguf::TensorInfo& require(const gguf::File& f, const std::string& name, const std::vector<int64_t>& shape) {
    const auto* t = f.find_tensor(name);
    if (!t) fail("{}: tensor {} is missing", f.name(), name);
    if (t->shape != shape)
        fail("{}: tensor {} has shape {}, expected {}", f.name(), name, shape_string(t->shape), shape_string(shape));
    return *t;
}

}  // namespace

backend::MatrixSource regrouped(BuiltModel& m, const gguf::File& f, const gguf::TensorInfo& t, int64_t cols,
                                const std::vector<RowRun>& runs, const std::string& name) {
    const auto row_bytes_or = gguf::row_size(t.type, cols);
    if (!row_bytes_or) fail("{}: tensor {}: {} columns are not whole blocks of {}", f.name(), t.name, cols,
                            gguf::type_name(uint32_t(t.type)));
    const size_t row_bytes = size_t(*row_bytes_or);
    int64_t rows = 0;
    for (const RowRun& r : runs) rows += r.count;
    std::vector<uint8_t>& bytes = m.host_buffers.emplace_back(size_t(rows) * row_bytes, uint8_t(0));
    size_t at = 0;
    for (const RowRun& r : runs) {
        if (r.first >= 0) std::memcpy(bytes.data() + at, t.data + size_t(r.first) * row_bytes, size_t(r.count) * row_bytes);
        at += size_t(r.count) * row_bytes;
    }
    return {t.type, bytes.data(), rows, cols, name, false};
}

bool TensorBinder::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

const backend::Weight& TensorBinder::matrix(const std::vector<MatrixName>& parts, backend::WeightUse use) {
    std::vector<backend::MatrixSource> sources;
    for (const auto& p : parts) {
        const auto& t = require(file_, p.name, {p.cols, p.rows});
        sources.push_back({t.type, t.data, p.rows, p.cols, p.name, file_.is_mapped()});
    }
    try {
        out_.weights.push_back(backend_.upload_weight(std::move(sources), use));
    } catch (const Error& e) {
        fail("{}: {}", file_.name(), e.what());
    }
    if (use != backend::WeightUse::embedding) out_.matmul_weights.push_back(out_.weights.back().get());
    return *out_.weights.back();
}

const backend::Weight& TensorBinder::split_matrix(const std::string& name, int64_t cols,
                                                  const std::vector<std::pair<std::string, int64_t>>& parts) {
    int64_t total = 0;
    for (const auto& [part, rows] : parts) total += rows;
    const auto& t = require(file_, name, {cols, total});
    const auto row_bytes_or = gguf::row_size(t.type, cols);
    if (!row_bytes_or) fail("{}: tensor {}: {} columns are not whole blocks of {}", file_.name(), name, cols,
                            gguf::type_name(uint32_t(t.type)));
    const size_t row_bytes = size_t(*row_bytes_or);
    std::vector<backend::MatrixSource> sources;
    int64_t row = 0;
    for (const auto& [part, rows] : parts) {
        sources.push_back({t.type, t.data + size_t(row) * row_bytes, rows, cols, fmt::format("{}[{}]", name, part),
                           file_.is_mapped()});
        row += rows;
    }
    try {
        out_.weights.push_back(backend_.upload_weight(std::move(sources), backend::WeightUse::matmul));
    } catch (const Error& e) {
        fail("{}: {}", file_.name(), e.what());
    }
    out_.matmul_weights.push_back(out_.weights.back().get());
    return *out_.weights.back();
}

std::vector<float> TensorBinder::floats(const std::string& name, int64_t n) const {
    return dequantized(require(file_, name, {n}), name, 0, n);
}

std::vector<float> TensorBinder::matrix_row(const std::string& name, int64_t cols, int64_t rows, int64_t row) const {
    if (row < 0 || row >= rows) fail("{}: tensor {} has no row {} (it has {})", file_.name(), name, row, rows);
    return dequantized(require(file_, name, {cols, rows}), name, row, cols);
}

std::vector<float> TensorBinder::dequantized(const gguf::TensorInfo& t, const std::string& name, int64_t row,
                                             int64_t n) const {
    std::vector<float> out(static_cast<size_t>(n));
    if (t.type != gguf::GgmlType::F32 && t.type != gguf::GgmlType::F16 && t.type != gguf::GgmlType::BF16 &&
        !quant::is_supported_block_type(t.type))
        fail("{}: tensor {}: type {} is not supported", file_.name(), name, gguf::type_name(uint32_t(t.type)));
    const auto* data = static_cast<const uint8_t*>(t.data) + size_t(row) * gguf::row_size(t.type, n).value_or(0);
    const auto* u16 = reinterpret_cast<const uint16_t*>(data);
    switch (t.type) {
        case gguf::GgmlType::F32: std::copy_n(reinterpret_cast<const float*>(data), n, out.begin()); break;
        case gguf::GgmlType::F16: for (int64_t i = 0; i < n; ++i) out[size_t(i)] = f16_to_f32(u16[i]); break;
        case gguf::GgmlType::BF16: for (int64_t i = 0; i < n; ++i) out[size_t(i)] = bf16_to_f32(u16[i]); break;
        default: quant::dequantize_row(t.type, data, out.data(), n);
    }
    return out;
}

const backend::Vector& TensorBinder::vector(const std::string& name, int64_t n) {
    const std::vector<float> v = floats(name, n);
    out_.vectors.push_back(backend_.upload_vector(v));
    return *out_.vectors.back();
}

const gguf::TensorInfo& TensorBinder::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
    return require(file_, name, shape);
}

std::vector<float> TensorBinder::all_floats(const std::string& name, const std::vector<int64_t>& shape) const {
    const auto& t = require(file_, name, shape);
    int64_t rows = 1;
    for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
    std::vector<float> out;
    out.reserve(size_t(rows * shape.at(0)));
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row = dequantized(t, name, r, shape[0]);
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

const backend::Weight& TensorBinder::regrouped_matrix(
    const std::string& name, int64_t cols, int64_t rows, const std::vector<std::pair<std::string, std::vector<RowRun>>>& parts) {
    const auto& t = require(file_, name, {cols, rows});
    std::vector<backend::MatrixSource> sources;
    for (const auto& [part, runs] : parts) {
        for (const RowRun& r : runs)
            if (r.first < 0 || r.first + r.count > rows)
                fail("{}: tensor {}: rows {}..{} are outside its {} rows", file_.name(), name, r.first, r.first + r.count,
                     rows);
        sources.push_back(regrouped(out_, file_, t, cols, runs, fmt::format("{}[{}]", name, part)));
    }
    return upload(std::move(sources));
}

const backend::Weight& TensorBinder::upload(std::vector<backend::MatrixSource> parts) {
    try {
        out_.weights.push_back(backend_.upload_weight(std::move(parts), backend::WeightUse::matmul));
    } catch (const Error& e) {
        fail("{}: {}", file_.name(), e.what());
    }
    out_.matmul_weights.push_back(out_.weights.back().get());
    return *out_.weights.back();
}

const backend::Rope& TensorBinder::rope(backend::RopeSpec spec) {
    out_.ropes.push_back(backend_.upload_rope(std::move(spec)));
    return *out_.ropes.back();
}

}  // namespace pagoda::model
