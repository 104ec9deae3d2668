#include "quant/imatrix_file.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::quant {

namespace {

const std::string kSums = ".in_sum2", kCounts = ".counts";

bool strip_suffix(std::string& name, const std::string& suffix) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
    name.resize(name.size() - suffix.size());
    return true;
}

std::vector<float> f32_values(const gguf::File& file, const gguf::TensorInfo& t) {
    if (t.type != gguf::GgmlType::F32)
        fail("imatrix {}: tensor {} is {}, expected f32", file.name(), t.name, gguf::type_name(uint32_t(t.type)));
    std::vector<float> v(size_t(t.n_elements()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    for (float x : v)
        if (!std::isfinite(x) || x < 0) fail("imatrix {}: tensor {} holds {}, expected finite values >= 0", file.name(), t.name, x);
    return v;
}

}  // namespace

std::map<std::string, std::vector<float>> read_imatrix(const gguf::File& file) {
    for (const char* key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"})
        if (!file.has(key)) fail("imatrix {}: metadata key {} is missing (not an imatrix GGUF?)", file.name(), key);
    std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
    for (const auto& t : file.tensors()) {
        std::string base = t.name;
        if (strip_suffix(base, kSums)) pairs[base].first = &t;
        else if (strip_suffix(base, kCounts)) pairs[base].second = &t;
        else fail("imatrix {}: tensor {} is neither NAME{} nor NAME{}", file.name(), t.name, kSums, kCounts);
    }
    if (pairs.empty()) fail("imatrix {}: no tensors", file.name());
    std::map<std::string, std::vector<float>> out;
    for (const auto& [name, pair] : pairs) {
        const auto [sums_t, counts_t] = pair;
        if (!sums_t) fail("imatrix {}: {}{} has no {}{}", file.name(), name, kCounts, name, kSums);
        if (!counts_t) fail("imatrix {}: {}{} has no {}{}", file.name(), name, kSums, name, kCounts);
        if (sums_t->shape.empty() || sums_t->shape.size() > 2 || sums_t->shape[0] <= 0)
            fail("imatrix {}: {} must have shape [n_cols] or [n_cols, n_mat]", file.name(), sums_t->name);
        const int64_t cols = sums_t->shape[0], n_mat = sums_t->shape.size() == 2 ? sums_t->shape[1] : 1;
        if (counts_t->n_elements() != n_mat)
            fail("imatrix {}: {} has {} values, expected {} (one per matrix of {})", file.name(), counts_t->name,
                 counts_t->n_elements(), n_mat, sums_t->name);
        const std::vector<float> sums = f32_values(file, *sums_t), counts = f32_values(file, *counts_t);
        std::vector<double> acc(size_t(cols), 0.0);
        double total = 0;
        for (int64_t j = 0; j < n_mat; ++j) {
            if (counts[size_t(j)] <= 0) continue;
            total += counts[size_t(j)];
            for (int64_t c = 0; c < cols; ++c) acc[size_t(c)] += sums[size_t(j * cols + c)];
        }
        std::vector<float>& v = out[name];
        v.assign(size_t(cols), 1.0f);  // never saw input: uniform
        if (total > 0)
            for (int64_t c = 0; c < cols; ++c) v[size_t(c)] = float(acc[size_t(c)] / total);
    }
    return out;
}

std::map<std::string, std::vector<float>> read_imatrix_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("imatrix {}: cannot open the file", path);
    char magic[4] = {};
    in.read(magic, 4);
    if (in.gcount() != 4 || std::memcmp(magic, "GGUF", 4) != 0)
        fail("imatrix {}: not a GGUF file (the legacy .dat imatrix format is not supported; convert it with "
             "llama-imatrix --in-file {} -o imatrix.gguf)", path, path);
    const auto file = gguf::File::open(path);
    return read_imatrix(*file);
}

}  // namespace pagoda::quant
