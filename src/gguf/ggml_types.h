// GGML tensor element types as GGUF files name them, with their block geometry. Every type id a
// GGUF file may carry is recognised here (name, values per block, bytes per block) even when pagoda
// cannot compute with it yet: that lets the reader validate sizes and give "not supported yet"
// errors that name the type.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace pagoda::gguf {

enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TypeTraits {
    const char* name;     // as llama.cpp prints it, e.g. "q4_K"
    int64_t block_size;   // values per block
    int64_t type_size;    // bytes per block
};

// nullptr when the id is not a known GGML type (including the removed ids 4, 5, 31-33, 36-38).
const TypeTraits* type_traits(uint32_t type_id);
const TypeTraits& type_traits(GgmlType type);  // for a known type
std::string type_name(uint32_t type_id);       // "q8_0", or "unknown(77)"
std::optional<GgmlType> type_from_name(const std::string& name);  // case-insensitive

// Bytes of a row of n values; nullopt when n is not a multiple of the block size or it overflows.
std::optional<uint64_t> row_size(GgmlType type, int64_t n);

}  // namespace pagoda::gguf
