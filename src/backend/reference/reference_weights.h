// The reference backend's weights, vectors and RoPE tables. A weight stays a view of the model
// file (its parts as the file stores them) and is dequantised one row at a time, to doubles, when
// an op reads it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace pagoda::backend::reference {

// Bytes of one row of m in the file.
uint64_t row_bytes(const MatrixSource& m);
// Row r of m as doubles: exactly the values the file stores.
void dequantize_row(const MatrixSource& m, int64_t r, double* out);
// Throws pagoda::Error unless m is a non-empty weight part of `cols` columns in a type the
// reference computes.
void validate_part(const MatrixSource& m, int64_t cols);

class ReferenceWeight final : public Weight {
public:
    ReferenceWeight(std::vector<MatrixSource> parts, WeightUse use) : Weight(std::move(parts)), use(use) {}
    std::vector<std::span<const uint8_t>> host_memory() const override {
        std::vector<std::span<const uint8_t>> out;
        for (const auto& m : parts())
            out.emplace_back(static_cast<const uint8_t*>(m.data), size_t(row_bytes(m) * uint64_t(m.rows)));
        return out;
    }
    const std::string& name() const { return parts()[0].name; }
    const WeightUse use;
};

class ReferenceVector final : public Vector {
public:
    explicit ReferenceVector(std::span<const float> v) : Vector(int64_t(v.size())), values(v.begin(), v.end()) {}
    const std::vector<double> values;
};

class ReferenceRope final : public Rope {
public:
    explicit ReferenceRope(RopeSpec spec) : Rope(std::move(spec)) {}
};

// The reference's own object behind a backend handle; another backend's is refused by name.
template <class Ours, class Base>
const Ours& downcast(const Base& object, const char* what) {
    const auto* p = dynamic_cast<const Ours*>(&object);
    if (!p) fail("reference backend: a {} made by another backend was passed to it", what);
    return *p;
}
inline const ReferenceWeight& ours(const Weight& w) { return downcast<ReferenceWeight>(w, "weight"); }
inline const ReferenceVector& ours(const Vector& v) { return downcast<ReferenceVector>(v, "vector"); }

}  // namespace pagoda::backend::reference
