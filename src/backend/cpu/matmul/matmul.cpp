#include "backend/cpu/matmul/matmul.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "quant/dequantize.h"

namespace pagoda::backend::cpu {

using gguf::GgmlType;

namespace {

std::mutex g_config_mutex;
GemmTiles g_tiles;
std::atomic<int> g_quant_method{-1};
std::atomic<int> g_float_method{-1};
thread_local CallPaths t_call_paths;

}  // namespace

bool matmul_supports(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 ||
           quant::is_supported_block_type(type);
}

void require_matmul_support(GgmlType type, const std::string& what) {
    if (!matmul_supports(type))
        fail("{}: weight type {} is not supported yet", what, gguf::type_name(uint32_t(type)));
}

int64_t detail::row_bytes(const WeightView& w) {
    auto size = gguf::row_size(w.type, w.cols);
    if (!size) fail("matmul: {} columns is not a valid row of {}", w.cols, gguf::type_name(uint32_t(w.type)));
    return int64_t(*size);
}

void dequantize_row(const WeightView& w, int64_t r, float* out) {
    const int64_t n = w.cols;
    switch (w.type) {
        case GgmlType::F32: {
            const float* row = static_cast<const float*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = row[c];
            return;
        }
        case GgmlType::F16: {
            const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = f16_to_f32(row[c]);
            return;
        }
        case GgmlType::BF16: {
            const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = bf16_to_f32(row[c]);
            return;
        }
        default:
            require_matmul_support(w.type, "dequantize_row");
            quant::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * detail::row_bytes(w), out, n);
    }
}

void matmul_reference(const WeightView& w, const float* x, int64_t n_tokens, float* y) {
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w, r, row.data());
        for (int64_t t = 0; t < n_tokens; ++t) {
            double acc = 0;
            const float* xt = x + t * w.cols;
            for (int64_t c = 0; c < w.cols; ++c) acc += double(row[size_t(c)]) * xt[c];
            y[t * w.rows + r] = float(acc);
        }
    }
}

CallPaths call_paths() { return t_call_paths; }
void set_call_paths(const CallPaths& paths) { t_call_paths = paths; }
namespace {
std::atomic<uint64_t> g_wide_dispatch{0};
}  // namespace
uint64_t wide_dispatch_count() { return g_wide_dispatch.load(std::memory_order_relaxed); }
void detail::count_wide_dispatch() { g_wide_dispatch.fetch_add(1, std::memory_order_relaxed); }
int64_t wide_min_tokens() {
    const CallPaths p = call_paths();
    return p.wide_min_tokens ? *p.wide_min_tokens : kDefaultWideMinTokens;
}

PackedWeight keep_views(std::span<const WeightView> parts) {
    if (parts.empty()) fail("keep_views: no matrices");
    PackedWeight p;
    p.source_ = parts[0];
    p.source_.rows = 0;
    for (const WeightView& w : parts) {
        require_matmul_support(w.type, "keep_views");
        if (w.type != parts[0].type || w.cols != parts[0].cols)
            fail("keep_views: stacked matrices must share type and width");
        (void)detail::row_bytes(w);
        p.source_.rows += w.rows;
    }
    p.parts_.assign(parts.begin(), parts.end());
    if (parts.size() > 1) p.source_.data = nullptr;
    return p;
}

GemmTiles gemm_tiles() {
    if (t_call_paths.tiles) return *t_call_paths.tiles;
    std::lock_guard<std::mutex> lock(g_config_mutex);
    return g_tiles;
}

void set_gemm_tiles(const GemmTiles& tiles) {
    if (tiles.kc <= 0 || tiles.mc <= 0 || tiles.nc <= 0)
        fail("GEMM tiles must be positive (kc={}, mc={}, nc={})", tiles.kc, tiles.mc, tiles.nc);
    std::lock_guard<std::mutex> lock(g_config_mutex);
    g_tiles = tiles;
    g_tiles.kc = (tiles.kc + 255) / 256 * 256;
}

const char* quant_method_name(QuantMethod m) { return m == QuantMethod::int8_dot ? "int8_dot" : "dequant_fma"; }

QuantMethod quant_method() {
    if (t_call_paths.quant) return *t_call_paths.quant;
    int v = g_quant_method.load();
    if (v >= 0) return QuantMethod(v);
    QuantMethod m = QuantMethod::int8_dot;
    if (const char* env = std::getenv("PAGODA_QUANT_METHOD"); env && *env) {
        std::string s = env;
        if (s == "dequant_fma") m = QuantMethod::dequant_fma;
        else if (s != "int8_dot") fail("PAGODA_QUANT_METHOD={} is not one of int8_dot, dequant_fma", s);
    }
    g_quant_method.store(int(m));
    return m;
}

void set_quant_method(QuantMethod m) { g_quant_method.store(int(m)); }

const char* float_method_name(FloatMethod m) {
    switch (m) {
        case FloatMethod::f32_fma: return "f32_fma";
        case FloatMethod::bf16_dot: return "bf16_dot";
        case FloatMethod::amx_bf16: return "amx_bf16";
    }
    return "?";
}

FloatMethod float_method() {
    if (t_call_paths.fl) return *t_call_paths.fl;
    int v = g_float_method.load();
    if (v >= 0) return FloatMethod(v);
    const bool bf16_cpu = cpu_features().avx512bf16 && best_supported_isa() == Isa::avx512;
    FloatMethod m = bf16_cpu ? FloatMethod::bf16_dot : FloatMethod::f32_fma;
    if (const char* env = std::getenv("PAGODA_FLOAT_METHOD"); env && *env) {
        std::string s = env;
        if (s == "f32_fma") m = FloatMethod::f32_fma;
        else if (s == "bf16_dot") m = FloatMethod::bf16_dot;
        else if (s == "amx_bf16") m = FloatMethod::amx_bf16;
        else fail("PAGODA_FLOAT_METHOD={} is not one of f32_fma, bf16_dot, amx_bf16", s);
    }
    g_float_method.store(int(m));
    return m;
}

void set_float_method(FloatMethod m) { g_float_method.store(int(m)); }

bool bf16_kernel_available() {
    return float_method() == FloatMethod::bf16_dot && active_isa() == Isa::avx512 && cpu_features().avx512bf16;
}

bool bf16_tiles_available() { return float_method() == FloatMethod::amx_bf16 && amx_bf16_tiles_run_here(); }

std::string describe_kernel_paths() {
    const Isa isa = active_isa();
    const auto& f = cpu_features();
    std::string isa_detail = isa == Isa::avx512 ? "AVX-512 f32 FMA, 16 lanes"
                             : isa == Isa::avx2 ? "AVX2 f32 FMA + F16C, 8 lanes"
                                                : "portable scalar, 8 lanes";
    std::string quant_detail;
    if (quant_method() == QuantMethod::dequant_fma) {
        quant_detail = "dequantise to f32 tiles + FMA";
    } else {
        quant_detail = vnni_panels_active()    ? "int8 dot, vpdpbusd (AVX-512 VNNI), panels for the packed types"
                       : isa != Isa::scalar ? "int8 dot, AVX2 vpmaddubsw + vpmaddwd, panels for the packed types"
                                            : "int8 dot, scalar";
    }
    const std::string float_detail =
        bf16_kernel_available()   ? "bf16 dot, vdpbf16ps panels (AVX-512 BF16)"
        : bf16_tiles_available()  ? (amx_emulation() ? "AMX bf16 tiles (emulated)" : "AMX bf16 tiles, tdpbf16ps")
        : float_method() == FloatMethod::amx_bf16
            ? fmt::format("f32 FMA (amx_bf16 unavailable here: AMX bf16 tiles {})", amx_bf16_status())
        : float_method() == FloatMethod::bf16_dot ? "f32 FMA (bf16 dot unavailable on this path)"
                                                  : "f32 FMA";
    return fmt::format("kernels: {} path ({}); quantised weights: {}; f16/bf16 weights: {}; cpu: {}", isa_name(isa),
                       isa_detail, quant_detail, float_detail, f.summary());
}

void log_kernel_paths() {
    static std::once_flag once;
    std::call_once(once, [] { log_info("{}", describe_kernel_paths()); });
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    require_matmul_support(w.type, "matmul");
    if (w.rows < 0 || w.cols < 0 || n_tokens < 0) fail("matmul: negative shape");
    if (w.rows == 0 || n_tokens == 0) return;
    (void)detail::row_bytes(w);  // validates cols against the block size
    const GemmTiles tiles = gemm_tiles();
    const bool is_float = w.type == GgmlType::F32 || w.type == GgmlType::F16 || w.type == GgmlType::BF16;
    const bool int8 = !is_float && quant_method() == QuantMethod::int8_dot;
    switch (active_isa()) {
        case Isa::avx512:
            // Our avx512 kernels use VNNI for int8; without it fall back to the AVX2 int8 kernel.
            if (int8 && !cpu_features().avx512vnni) return detail::matmul_int8_avx2(w, x, n_tokens, y, pool, tiles);
            return int8 ? detail::matmul_int8_avx512(w, x, n_tokens, y, pool, tiles)
                        : detail::matmul_float_avx512(w, x, n_tokens, y, pool, tiles);
        case Isa::avx2:
            return int8 ? detail::matmul_int8_avx2(w, x, n_tokens, y, pool, tiles)
                        : detail::matmul_float_avx2(w, x, n_tokens, y, pool, tiles);
        case Isa::scalar:
            return int8 ? detail::matmul_int8_scalar(w, x, n_tokens, y, pool, tiles)
                        : detail::matmul_float_scalar(w, x, n_tokens, y, pool, tiles);
    }
}

}  // namespace pagoda::backend::cpu
