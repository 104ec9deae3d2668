// The GGML type table: block geometry for every type id a GGUF file may name (facts from ggml's
// type_traits). Ids that ggml retired (4, 5, 31-33, 36-38) are deliberately absent.
#include "gguf/ggml_types.h"

#include <array>
#include <cctype>
#include <limits>
#include <string_view>

#include "core/error.h"

namespace pagoda::gguf {
namespace {

constexpr uint32_t kMaxTypeId = 40;

// Indexed by type id; a null name marks an id that is not a type.
constexpr std::array<TypeTraits, kMaxTypeId> kTraits = [] {
    std::array<TypeTraits, kMaxTypeId> t{};
    auto set = [&](GgmlType id, const char* name, int64_t block, int64_t bytes) {
        t[static_cast<uint32_t>(id)] = TypeTraits{name, block, bytes};
    };
    set(GgmlType::F32, "f32", 1, 4);
    set(GgmlType::F16, "f16", 1, 2);
    set(GgmlType::Q4_0, "q4_0", 32, 18);
    set(GgmlType::Q4_1, "q4_1", 32, 20);
    set(GgmlType::Q5_0, "q5_0", 32, 22);
    set(GgmlType::Q5_1, "q5_1", 32, 24);
    set(GgmlType::Q8_0, "q8_0", 32, 34);
    set(GgmlType::Q8_1, "q8_1", 32, 36);
    set(GgmlType::Q2_K, "q2_K", 256, 84);
    set(GgmlType::Q3_K, "q3_K", 256, 110);
    set(GgmlType::Q4_K, "q4_K", 256, 144);
    set(GgmlType::Q5_K, "q5_K", 256, 176);
    set(GgmlType::Q6_K, "q6_K", 256, 210);
    set(GgmlType::Q8_K, "q8_K", 256, 292);
    set(GgmlType::IQ2_XXS, "iq2_xxs", 256, 66);
    set(GgmlType::IQ2_XS, "iq2_xs", 256, 74);
    set(GgmlType::IQ3_XXS, "iq3_xxs", 256, 98);
    set(GgmlType::IQ1_S, "iq1_s", 256, 50);
    set(GgmlType::IQ4_NL, "iq4_nl", 32, 18);
    set(GgmlType::IQ3_S, "iq3_s", 256, 110);
    set(GgmlType::IQ2_S, "iq2_s", 256, 82);
    set(GgmlType::IQ4_XS, "iq4_xs", 256, 136);
    set(GgmlType::I8, "i8", 1, 1);
    set(GgmlType::I16, "i16", 1, 2);
    set(GgmlType::I32, "i32", 1, 4);
    set(GgmlType::I64, "i64", 1, 8);
    set(GgmlType::F64, "f64", 1, 8);
    set(GgmlType::IQ1_M, "iq1_m", 256, 56);
    set(GgmlType::BF16, "bf16", 1, 2);
    set(GgmlType::TQ1_0, "tq1_0", 256, 54);
    set(GgmlType::TQ2_0, "tq2_0", 256, 66);
    set(GgmlType::MXFP4, "mxfp4", 32, 17);
    return t;
}();

}  // namespace

const TypeTraits* type_traits(uint32_t type_id) {
    if (type_id >= kMaxTypeId || kTraits[type_id].name == nullptr) return nullptr;
    return &kTraits[type_id];
}

const TypeTraits& type_traits(GgmlType type) {
    const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
    if (!t) fail("unknown GGML type id {}", static_cast<uint32_t>(type));
    return *t;
}

std::string type_name(uint32_t type_id) {
    if (const TypeTraits* t = type_traits(type_id)) return t->name;
    return "unknown(" + std::to_string(type_id) + ")";
}

std::optional<GgmlType> type_from_name(const std::string& name) {
    for (uint32_t id = 0; id < kMaxTypeId; ++id) {
        const char* candidate = kTraits[id].name;
        if (!candidate) continue;
        std::string_view c(candidate);
        if (c.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < c.size() && same; ++i)
            same = std::tolower(static_cast<unsigned char>(c[i])) == std::tolower(static_cast<unsigned char>(name[i]));
        if (same) return static_cast<GgmlType>(id);
    }
    return std::nullopt;
}

std::optional<uint64_t> row_size(GgmlType type, int64_t n) {
    const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
    if (!t || n < 0 || n % t->block_size != 0) return std::nullopt;
    uint64_t blocks = static_cast<uint64_t>(n / t->block_size);
    uint64_t bytes_per_block = static_cast<uint64_t>(t->type_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / bytes_per_block) return std::nullopt;
    return blocks * bytes_per_block;
}

}  // namespace pagoda::gguf
