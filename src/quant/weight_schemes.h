// pagoda's own weight-only quantisation schemes, and how they are stored.
//   int8        per output channel (row): one scale per row, symmetric, q in -127..127
//   int4-g32    groups of 32 along the row, asymmetric: per-group scale and minimum, q in 0..15
//   int4-g128   the same with groups of 128
// Decision: each scheme is stored as a *standard* GGML type that represents it exactly, so every GGUF
// reader (llama.cpp included) loads our files and computes the same values:
//   int8      -> Q8_0 with the row's f16 scale repeated in every block (Q8_0's value = d*q)
//   int4-g32  -> Q4_1 (value = d*q + m per 32) — the scheme *is* Q4_1
//   int4-g128 -> Q4_1 with the group's (d, m) repeated in its four blocks
// The price is storage: int4-g128 takes Q4_1's 5 bits per weight instead of 4.125; a custom type id
// would save that but no other reader could load the file. What differs from ggml's own quantisers is
// how the parameters are chosen (per row / per 128-group), not the format.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

enum class WeightScheme { int8_per_channel, int4_g32, int4_g128 };

const char* scheme_name(WeightScheme s);                       // "int8", "int4-g32", "int4-g128"
std::optional<WeightScheme> scheme_from_name(const std::string& name);
gguf::GgmlType scheme_storage_type(WeightScheme s);            // Q8_0 or Q4_1
int64_t scheme_group_size(WeightScheme s);                     // 0 (whole row), 32 or 128

// Quantises one row of n values into n/32 blocks of the storage type. Throws pagoda::Error when n is
// not a multiple of the group size (the row for int8: a multiple of 32), or a scale overflows f16.
void quantize_row_scheme(WeightScheme s, const float* x, void* out, int64_t n);

}  // namespace pagoda::quant
