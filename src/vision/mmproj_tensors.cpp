// mmproj tensor readers (see mmproj_tensors.h).
#include "vision/mmproj_tensors.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"

namespace pagoda::vision {

std::vector<float> tensor_floats(const gguf::File& f, const std::string& name) {
    const auto* t = f.find_tensor(name);
    if (!t) fail("{}: tensor {} is missing", f.name(), name);
    const auto n = size_t(t->n_elements());
    std::vector<float> out(n);
    switch (t->type) {
        case gguf::GgmlType::F32: std::memcpy(out.data(), t->data, n * 4); break;
        case gguf::GgmlType::F16:
        case gguf::GgmlType::BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t->data + 2 * i, 2);
                out[i] = t->type == gguf::GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            break;
        default:
            fail("{}: tensor {} is {}; the vision tower reads it as F32, F16 or BF16", f.name(), name,
                 gguf::type_traits(t->type).name);
    }
    return out;
}

backend::MatrixSource matrix_source(const gguf::File& f, const std::string& name, int64_t rows, int64_t cols,
                                    int64_t first_row) {
    const auto* t = f.find_tensor(name);
    if (!t) fail("{}: tensor {} is missing", f.name(), name);
    const auto row = gguf::row_size(t->type, cols);
    if (!row) fail("{}: tensor {}: rows of {} values do not fit its type's blocks", f.name(), name, cols);
    const size_t offset = size_t(first_row) * size_t(*row);
    return backend::MatrixSource{t->type, t->data + offset, rows, cols,
                                 first_row ? fmt::format("{} (rows {}..)", name, first_row) : name, f.is_mapped()};
}

}  // namespace pagoda::vision
