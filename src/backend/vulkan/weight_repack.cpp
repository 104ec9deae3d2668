#include "backend/vulkan/weight_repack.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"
#include "quant/dequantize.h"
#include "quant/iq_grids.h"

namespace pagoda::backend::vulkan {
namespace {

using gguf::GgmlType;
using namespace quant;

std::string type_name(GgmlType t) { return gguf::type_name(uint32_t(t)); }

// One block of 32 (simple types) or 256 (K types) values: codes and (scale, offset) per 16.
void decode_block(GgmlType type, const uint8_t* at, int8_t* codes, float* g) {
    auto set_groups = [&](int first, int count, float scale, float offset) {
        for (int i = first; i < first + count; ++i) g[2 * i] = scale, g[2 * i + 1] = offset;
    };
    switch (type) {
        case GgmlType::Q8_0: {
            BlockQ8_0 b;
            std::memcpy(&b, at, sizeof b);
            for (int j = 0; j < 32; ++j) codes[j] = b.qs[j];
            set_groups(0, 2, f16_to_f32(b.d), 0.0f);
            return;
        }
        case GgmlType::Q4_0:
        case GgmlType::Q4_1: {
            const bool q41 = type == GgmlType::Q4_1;
            BlockQ4_1 b1{};
            BlockQ4_0 b0{};
            const uint8_t* qs;
            if (q41) std::memcpy(&b1, at, sizeof b1), qs = b1.qs;
            else std::memcpy(&b0, at, sizeof b0), qs = b0.qs;
            const int bias = q41 ? 0 : 8;
            for (int j = 0; j < 16; ++j) {
                codes[j] = int8_t((qs[j] & 0x0f) - bias);
                codes[j + 16] = int8_t((qs[j] >> 4) - bias);
            }
            set_groups(0, 2, f16_to_f32(q41 ? b1.d : b0.d), q41 ? f16_to_f32(b1.m) : 0.0f);
            return;
        }
        case GgmlType::Q5_0:
        case GgmlType::Q5_1: {
            const bool q51 = type == GgmlType::Q5_1;
            BlockQ5_1 b1{};
            BlockQ5_0 b0{};
            const uint8_t *qs, *qhb;
            if (q51) std::memcpy(&b1, at, sizeof b1), qs = b1.qs, qhb = b1.qh;
            else std::memcpy(&b0, at, sizeof b0), qs = b0.qs, qhb = b0.qh;
            const uint32_t qh = uint32_t(qhb[0]) | uint32_t(qhb[1]) << 8 | uint32_t(qhb[2]) << 16 | uint32_t(qhb[3]) << 24;
            const int bias = q51 ? 0 : 16;
            for (int j = 0; j < 16; ++j) {
                codes[j] = int8_t(((qs[j] & 0x0f) | int((qh >> j) & 1) << 4) - bias);
                codes[j + 16] = int8_t(((qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4) - bias);
            }
            set_groups(0, 2, f16_to_f32(q51 ? b1.d : b0.d), q51 ? f16_to_f32(b1.m) : 0.0f);
            return;
        }
        case GgmlType::Q2_K: {
            BlockQ2_K b;
            std::memcpy(&b, at, sizeof b);
            const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
            for (int e = 0; e < kQK_K; ++e) {
                const int h = e / 128, s = (e / 32) % 4, l = e % 32;
                codes[e] = int8_t((b.qs[32 * h + l] >> (2 * s)) & 3);
            }
            for (int k = 0; k < 16; ++k) set_groups(k, 1, d * float(b.scales[k] & 0x0f), -(dmin * float(b.scales[k] >> 4)));
            return;
        }
        case GgmlType::Q3_K: {
            BlockQ3_K b;
            std::memcpy(&b, at, sizeof b);
            const float d = f16_to_f32(b.d);
            for (int e = 0; e < kQK_K; ++e) {
                const int h = e / 128, s = (e / 32) % 4, l = e % 32;
                const int low = (b.qs[32 * h + l] >> (2 * s)) & 3, high = (b.hmask[l] >> (4 * h + s)) & 1;
                codes[e] = int8_t((low | high << 2) - 4);
            }
            for (int k = 0; k < 16; ++k) set_groups(k, 1, d * float(int(q3_k_scale(k, b.scales)) - 32), 0.0f);
            return;
        }
        case GgmlType::Q4_K:
        case GgmlType::Q5_K: {
            const bool q5 = type == GgmlType::Q5_K;
            BlockQ5_K b5{};
            BlockQ4_K b4{};
            uint16_t dd, dm;
            const uint8_t *scales, *qs;
            if (q5) std::memcpy(&b5, at, sizeof b5), dd = b5.d, dm = b5.dmin, scales = b5.scales, qs = b5.qs;
            else std::memcpy(&b4, at, sizeof b4), dd = b4.d, dm = b4.dmin, scales = b4.scales, qs = b4.qs;
            const float d = f16_to_f32(dd), dmin = f16_to_f32(dm);
            for (int p = 0; p < 4; ++p) {
                for (int half = 0; half < 2; ++half) {
                    uint8_t sc, m;
                    k_scale_min(2 * p + half, scales, sc, m);
                    set_groups(4 * p + 2 * half, 2, d * float(sc), -(dmin * float(m)));
                }
                for (int l = 0; l < 32; ++l) {
                    int lo = qs[32 * p + l] & 0x0f, hi = qs[32 * p + l] >> 4;
                    if (q5) {
                        lo |= ((b5.qh[l] >> (2 * p)) & 1) << 4;
                        hi |= ((b5.qh[l] >> (2 * p + 1)) & 1) << 4;
                    }
                    codes[64 * p + l] = int8_t(lo);
                    codes[64 * p + 32 + l] = int8_t(hi);
                }
            }
            return;
        }
        case GgmlType::Q6_K: {
            BlockQ6_K b;
            std::memcpy(&b, at, sizeof b);
            const float d = f16_to_f32(b.d);
            for (int h = 0; h < 2; ++h) {
                const uint8_t* ql = b.ql + 64 * h;
                const uint8_t* qh = b.qh + 32 * h;
                for (int l = 0; l < 32; ++l) {
                    codes[128 * h + l] = int8_t(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
                    codes[128 * h + l + 32] = int8_t(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                    codes[128 * h + l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                    codes[128 * h + l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                }
            }
            // Element e = 128 h + 32 q + l uses scales[8 h + 2 q + l / 16] = scales[e / 16].
            for (int k = 0; k < 16; ++k) set_groups(k, 1, d * float(b.scales[k]), 0.0f);
            return;
        }
        default: break;
    }
    if (!is_codebook_type(type)) fail("vulkan backend: no repacking for {}", type_name(type));
    // IQ*, MXFP4: per 32-value sub-block the int8 codes and two scales the CPU decodes them to
    // (quant/codebook_blocks.h, the one copy of the grids); value = code * scale, bitwise ggml's.
    const int sub_blocks = int(gguf::type_traits(type).block_size / 32);
    for (int j = 0; j < sub_blocks; ++j) {
        float s[2];
        codebook_codes(type, at, j, codes + 32 * j);
        codebook_scales(type, at, j, s);
        set_groups(2 * j, 1, s[0], 0.0f);
        set_groups(2 * j + 1, 1, s[1], 0.0f);
    }
}

// The native format of a block type (f32 when it has none).
WeightFormat native_format(GgmlType t) {
    switch (t) {
        case GgmlType::Q8_0: return WeightFormat::q8_0;
        case GgmlType::Q4_0: return WeightFormat::q4_0;
        case GgmlType::Q4_1: return WeightFormat::q4_1;
        case GgmlType::Q5_0: return WeightFormat::q5_0;
        case GgmlType::Q5_1: return WeightFormat::q5_1;
        case GgmlType::Q2_K: return WeightFormat::q2_k;
        case GgmlType::Q3_K: return WeightFormat::q3_k;
        case GgmlType::Q4_K: return WeightFormat::q4_k;
        case GgmlType::Q5_K: return WeightFormat::q5_k;
        case GgmlType::Q6_K: return WeightFormat::q6_k;
        case GgmlType::IQ4_NL: return WeightFormat::iq4_nl;
        case GgmlType::IQ4_XS: return WeightFormat::iq4_xs;
        case GgmlType::MXFP4: return WeightFormat::mxfp4;
        case GgmlType::IQ2_XXS: return WeightFormat::iq2_xxs;
        case GgmlType::IQ2_XS: return WeightFormat::iq2_xs;
        case GgmlType::IQ2_S: return WeightFormat::iq2_s;
        case GgmlType::IQ3_XXS: return WeightFormat::iq3_xxs;
        case GgmlType::IQ3_S: return WeightFormat::iq3_s;
        case GgmlType::IQ1_S: return WeightFormat::iq1_s;
        case GgmlType::IQ1_M: return WeightFormat::iq1_m;
        default: return WeightFormat::f32;
    }
}

// PAGODA_VULKAN_WEIGHTS=grouped: every block type in the grouped layout (the tests' reference for
// the native variants); unset or "native": the file's layout. Anything else is refused.
bool grouped_forced() {
    const char* env = std::getenv("PAGODA_VULKAN_WEIGHTS");
    if (!env || !*env || std::string(env) == "native") return false;
    if (std::string(env) == "grouped") return true;
    fail("PAGODA_VULKAN_WEIGHTS={}: expected native or grouped", env);
}

// The grid a grid type's shader variant reads (at the weight's `groups` address): quant/iq_grids.h's
// table, the CPU's own copy, as bytes. Empty for the other formats.
std::vector<uint8_t> grid_bytes(WeightFormat f) {
    const IqGrids& g = iq_grids();
    auto bytes = [](const auto& table) {
        const auto* p = reinterpret_cast<const uint8_t*>(&table);
        return std::vector<uint8_t>(p, p + sizeof table);
    };
    switch (f) {
        case WeightFormat::iq2_xxs: return bytes(g.iq2xxs);
        case WeightFormat::iq2_xs: return bytes(g.iq2xs);
        case WeightFormat::iq2_s: return bytes(g.iq2s);
        case WeightFormat::iq3_xxs: return bytes(g.iq3xxs);
        case WeightFormat::iq3_s: return bytes(g.iq3s);
        case WeightFormat::iq1_s:
        case WeightFormat::iq1_m: return bytes(g.iq1s);
        default: return {};
    }
}

}  // namespace

const char* weight_format_name(WeightFormat f) {
    switch (f) {
        case WeightFormat::f32: return "f32";
        case WeightFormat::f16: return "f16";
        case WeightFormat::q: return "q";
        case WeightFormat::q8_0: return "q8_0";
        case WeightFormat::q4_0: return "q4_0";
        case WeightFormat::q4_1: return "q4_1";
        case WeightFormat::q5_0: return "q5_0";
        case WeightFormat::q5_1: return "q5_1";
        case WeightFormat::q2_k: return "q2_k";
        case WeightFormat::q3_k: return "q3_k";
        case WeightFormat::q4_k: return "q4_k";
        case WeightFormat::q5_k: return "q5_k";
        case WeightFormat::q6_k: return "q6_k";
        case WeightFormat::iq4_nl: return "iq4_nl";
        case WeightFormat::iq4_xs: return "iq4_xs";
        case WeightFormat::mxfp4: return "mxfp4";
        case WeightFormat::iq2_xxs: return "iq2_xxs";
        case WeightFormat::iq2_xs: return "iq2_xs";
        case WeightFormat::iq2_s: return "iq2_s";
        case WeightFormat::iq3_xxs: return "iq3_xxs";
        case WeightFormat::iq3_s: return "iq3_s";
        case WeightFormat::iq1_s: return "iq1_s";
        case WeightFormat::iq1_m: return "iq1_m";
    }
    return "?";
}

bool is_native(WeightFormat f) { return f != WeightFormat::f32 && f != WeightFormat::f16 && f != WeightFormat::q; }

WeightFormat weight_format(const MatrixSource& m) {
    switch (m.type) {
        case GgmlType::F32:
        case GgmlType::BF16: return WeightFormat::f32;
        case GgmlType::F16: return WeightFormat::f16;
        default: break;
    }
    if (is_supported_block_type(m.type)) {
        const WeightFormat native = native_format(m.type);
        return native == WeightFormat::f32 || grouped_forced() ? WeightFormat::q : native;
    }
    fail("tensor '{}': the vulkan backend cannot compute weights of type {} (it computes F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
         "Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M)",
         m.name, type_name(m.type));
}

void repack_block_row(const MatrixSource& m, int64_t row, int8_t* codes, float* groups) {
    const auto traits = gguf::type_traits(m.type);
    const int64_t per_block = traits.block_size, blocks = m.cols / per_block;
    const uint8_t* at = static_cast<const uint8_t*>(m.data) + uint64_t(row) * *gguf::row_size(m.type, m.cols);
    for (int64_t b = 0; b < blocks; ++b)
        decode_block(m.type, at + b * int64_t(traits.type_size), codes + b * per_block, groups + b * (per_block / 16) * 2);
}

Repacked repack(const std::vector<MatrixSource>& parts) {
    Repacked out;
    out.format = weight_format(parts.at(0));
    auto block_layout = [](WeightFormat f) { return f == WeightFormat::q || is_native(f); };
    for (const MatrixSource& p : parts) {
        const WeightFormat f = weight_format(p);
        if (f == out.format) continue;
        out.format = block_layout(f) && block_layout(out.format) ? WeightFormat::q : WeightFormat::f32;
    }
    if (is_native(out.format)) {  // the file's rows, stacked; padded to a whole 32-bit word
        size_t bytes = 0;
        for (const MatrixSource& p : parts) bytes += size_t(p.rows) * *gguf::row_size(p.type, p.cols);
        out.data.resize((bytes + 3) / 4 * 4);
        uint8_t* at = out.data.data();
        for (const MatrixSource& p : parts) {
            const size_t part_bytes = size_t(p.rows) * *gguf::row_size(p.type, p.cols);
            std::memcpy(at, p.data, part_bytes);
            at += part_bytes;
        }
        out.grid = grid_bytes(out.format);
        return out;
    }
    int64_t elements = 0;
    for (const MatrixSource& p : parts) elements += p.rows * p.cols;
    const size_t element_bytes = out.format == WeightFormat::f32 ? 4 : out.format == WeightFormat::f16 ? 2 : 1;
    out.data.resize((size_t(elements) * element_bytes + 3) / 4 * 4);
    if (out.format == WeightFormat::q) out.groups.resize(size_t(elements / 16) * 2);
    uint8_t* at = out.data.data();
    size_t group_at = 0;
    std::vector<float> row_values;
    for (const MatrixSource& p : parts) {
        const uint64_t row_bytes = *gguf::row_size(p.type, p.cols);
        const auto* src = static_cast<const uint8_t*>(p.data);
        for (int64_t r = 0; r < p.rows; ++r, src += row_bytes) {
            switch (out.format) {
                case WeightFormat::f16: std::memcpy(at, src, row_bytes); at += row_bytes; break;
                case WeightFormat::q:
                    repack_block_row(p, r, reinterpret_cast<int8_t*>(at), out.groups.data() + group_at);
                    at += p.cols;
                    group_at += size_t(p.cols / 16) * 2;
                    break;
                case WeightFormat::f32:
                    row_values.resize(size_t(p.cols));
                    if (p.type == GgmlType::F32) std::memcpy(row_values.data(), src, row_bytes);
                    else if (p.type == GgmlType::BF16 || p.type == GgmlType::F16)
                        for (int64_t c = 0; c < p.cols; ++c) {
                            uint16_t h;
                            std::memcpy(&h, src + 2 * c, 2);
                            row_values[size_t(c)] = p.type == GgmlType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
                        }
                    else dequantize_row(p.type, src, row_values.data(), p.cols);
                    std::memcpy(at, row_values.data(), size_t(p.cols) * 4);
                    at += p.cols * 4;
                    break;
                default: fail("vulkan backend: weight '{}' reached the row repacking in a native layout", p.name);
            }
        }
    }
    return out;
}

}  // namespace pagoda::backend::vulkan
