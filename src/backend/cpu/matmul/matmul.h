// Matrix multiplication with a weight matrix in any supported storage type:
//   y[t][r] = sum_c W[r][c] * x[t][c]   for t < n_tokens, r < rows
// W is row-major: `rows` rows of `cols` values, each row gguf::row_size(type, cols) bytes, exactly as
// GGUF stores a 2-D tensor of shape [cols, rows]. x is [n_tokens][cols] f32, y is [n_tokens][rows] f32.
// The result for a token never depends on n_tokens, the thread count or the tile sizes (batch
// invariance): every path reduces each output in one fixed order (see matmul_paths.h). Different ISA
// paths (scalar / avx2 / avx512, chosen by pagoda::active_isa()) and the two quantised methods may
// differ from each other in the last bits; each is tested against matmul_reference.
//
// Weight types: F32, F16, BF16 (converted to f32 in registers, f32 FMA; packed F16 / BF16 weights may
// instead use the bf16 dot method, see FloatMethod and PackedWeight), and Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the codebook types IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (signed int8 codes, quant/codebook_blocks.h). Quantised weights use, by default, the int8 method: activations are quantised per 32 values
// to int8 (scale = max|x|/127, round to nearest even) and multiplied with exact integer dot products
// (vpdpbusd on AVX-512 VNNI, vpmaddubsw + vpmaddwd on AVX2) on weight blocks unpacked in registers,
// scaled per block in f32. The alternative dequant_fma method dequantises weight tiles to f32 and
// runs the f32 GEMM (exact activations). For the fastest quantised path see PackedWeight below.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/ggml_types.h"

namespace pagoda::backend::cpu {

struct WeightView {
    gguf::GgmlType type = gguf::GgmlType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    // The bytes data spans (0 when cols is not a valid row length of the type).
    size_t bytes() const { return size_t(gguf::row_size(type, cols).value_or(0)) * size_t(rows); }
};

bool matmul_supports(gguf::GgmlType type);
// Throws pagoda::Error naming `what` and the type when the type cannot be computed yet.
void require_matmul_support(gguf::GgmlType type, const std::string& what);

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Weights repacked once (at model load) into a layout the fastest kernel reads directly. Q4_0, Q4_1,
// Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4 on a CPU with AVX-512 VNNI are repacked into panels of 8 rows whose 4-byte code
// groups interleave, so one vpdpbusd multiplies 8 rows at once and each row's block sum is exact in
// one int32 lane (no horizontal reduction); the row scales sit next to the codes (about as many bytes
// as in GGUF). Other types, or other CPUs, keep a plain view. matmul(PackedWeight) uses the packed
// kernel when the active path allows it (avx512 with VNNI, int8_dot method), otherwise the source view.
// Per output, the packed kernel accumulates one f32 over the 32-value blocks in order, with w the
// block's signed integer weights and sc its scale (Q4_K / Q5_K: f32(6-bit scale) * d; IQ4_NL / IQ4_XS /
// MXFP4: w the codebook values, sc = d, f32(ls - 32) * d, or the e8m0 scale halved):
//   acc = fma(f32(sum w q), sc * d_x, acc)
// plus for Q4_K / Q5_K  macc = fma(-(f32(6-bit min) * dmin), s, macc),  output acc + macc, where
// s = d_x * sum(first 16 q) + d_x * sum(last 16 q); Q6_K does one such FMA per 16-value half with its
// scale f32(int8 scale) * d; Q4_1 (unsigned codes, sc = d) adds macc = fma(m, s, macc) with its minimum m;
// for every n_tokens, so it is batch invariant like matmul (its last bits differ from the view path).
// F16 and BF16 weights, when float_method() is bf16_dot at packing time (which needs AVX-512 BF16 and
// the avx512 path), are packed into panels of 16 rows: for each pair of columns (2j, 2j+1) one 64-byte
// vector holds, in dword i, row i's bf16 values (low half: column 2j, high half: column 2j+1); an odd
// width gets one zero column. F16 values are rounded to bf16 (nearest even), BF16 values are copied.
// The kernel rounds each activation to bf16 (nearest even; f32 denormals become signed zeros) and,
// per output, runs one f32 accumulator from +0 through the column pairs in order, with vdpbf16ps
// semantics: acc = (acc + w[2j+1]*x[2j+1]) + w[2j]*x[2j], each product exact, each addition rounded
// to nearest even, bf16 denormal inputs read as zero and denormal sums flushed to zero. That order
// depends only on (row, token): decode and prefill agree bit for bit. When the method or the ISA no
// longer allows the kernel, matmul uses the source view (f32 FMA). Under amx_bf16 (where it runs) the
// same panels are padded to whole K tiles of 16 column pairs (bf16_tiles layout, amx_bf16_kernel.h).
// The source data must outlive the PackedWeight (it is the fallback).
// Stacking (pack_weights) works on every path: without a packed kernel the parts are multiplied one
// by one and their outputs interleaved per token.
// The packed bytes live in 2 MiB-aligned memory advised for transparent huge pages (decode streams
// them; 4 KiB pages would cost a TLB miss per page); copies share them (immutable).
class PackedWeight {
public:
    PackedWeight() = default;
    // The whole matrix: for a stacked weight (pack_weights) rows is the sum of the parts' rows and
    // data is null (the parts hold the bytes).
    const WeightView& source() const { return source_; }
    const std::vector<WeightView>& parts() const { return parts_; }
    bool is_packed() const { return bytes_ > 0; }
    // Which kernel's layout data() holds (view: nothing packed, the source is read).
    enum class Layout { view, int8_panels, bf16_panels, bf16_tiles };
    Layout layout() const { return layout_; }
    const uint8_t* data() const { return data_.get(); }
    size_t packed_bytes() const { return bytes_; }

private:
    friend PackedWeight pack_weights(std::span<const WeightView> parts);
    friend PackedWeight keep_views(std::span<const WeightView> parts);
    WeightView source_;
    std::vector<WeightView> parts_;
    std::shared_ptr<uint8_t> data_;
    size_t bytes_ = 0;
    Layout layout_ = Layout::view;
};

// Throws pagoda::Error for an unsupported type or a bad shape (as matmul would).
PackedWeight pack_weight(const WeightView& w);
// Several matrices of one type and width stacked by rows into one weight: matmul then writes, per
// token, part 0's outputs, then part 1's, ... (e.g. Q, K and V from one pass over the input, which is
// quantised once). Same results, bit for bit, as the parts multiplied one by one. Throws when the
// parts differ in type or columns.
PackedWeight pack_weights(std::span<const WeightView> parts);
void matmul(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
// The parts stacked as pack_weights does but never repacked (is_packed() is false): for a weight whose
// planned method reads the file's view (dequant_fma, f32_fma), so no panels take memory unused.
PackedWeight keep_views(std::span<const WeightView> parts);

// Activations quantised once for every packed int8 matmul that reads them (the norm + quantise
// fusion: the norm's pass quantises each row while it is in cache). The storage of n_tokens rows of
// `cols` values is prequantized_bytes() long: all rows' int8 codes, then their per-32 scales, then the
// int32 sums of the codes over each 16-value half. Only where takes_prequantized() is true (the packed
// VNNI path): matmul() from it gives bitwise the results of matmul() from the f32 rows.
struct PrequantizedLayout {
    PrequantizedLayout(void* storage, int64_t n_tokens, int64_t cols)
        : nbp((cols / 32 + 7) / 8 * 8),
          q(static_cast<int8_t*>(storage)),
          d(reinterpret_cast<float*>(static_cast<uint8_t*>(storage) + (n_tokens * cols + 63) / 64 * 64)),
          sums(reinterpret_cast<int32_t*>(d + n_tokens * nbp)) {}
    int64_t nbp;   // blocks per row, padded to a multiple of 8
    int8_t* q;     // [n_tokens][cols]
    float* d;      // [n_tokens][nbp]
    int32_t* sums; // [n_tokens][nbp][2]
};
size_t prequantized_bytes(int64_t n_tokens, int64_t cols);
// The packed int8 panels are the active path (avx2 or avx512 ISA, int8_dot method): on the VNNI
// kernel where vnni_panels_active() (avx512 with VNNI), else on the AVX2 kernel, bitwise the same.
bool packed_int8_path_active();
bool vnni_panels_active();
bool takes_prequantized(const PackedWeight& w);
// Quantises row t of n_tokens rows into the storage (rows are independent: any thread, any order).
void prequantize_row(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage);
void matmul_prequantized(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y, ThreadPool& pool);

// Plain reference (one row at a time, double accumulation) that every optimised path is tested against.
void matmul_reference(const WeightView& w, const float* x, int64_t n_tokens, float* y);

// Dequantises row r of W into out[cols].
void dequantize_row(const WeightView& w, int64_t r, float* out);

// Cache tiling of the f32 GEMM (values are elements). Results do not depend on them, so a tuner may
// set them per machine. kc is rounded up to a multiple of 256; mc to a multiple of the row block.
struct GemmTiles {
    int64_t kc = 1024;  // K extent of a tile (f32 path only); lanes leave the registers only between tiles
    int64_t mc = 32;    // rows per parallel task
    int64_t nc = 64;    // tokens per pass over a row task's weights (bounds the partial-sum scratch)
};
GemmTiles gemm_tiles();
void set_gemm_tiles(const GemmTiles& tiles);  // throws on non-positive values

enum class QuantMethod { int8_dot, dequant_fma };
// Initially int8_dot unless PAGODA_QUANT_METHOD=dequant_fma (or int8_dot) says otherwise.
QuantMethod quant_method();
void set_quant_method(QuantMethod m);
const char* quant_method_name(QuantMethod m);

// How F16 / BF16 weights are multiplied once packed (pack_weights; unpacked views always use f32 FMA).
// bf16_dot (vdpbf16ps, twice the f32 FMA throughput on AVX-512 BF16 CPUs) rounds the activations to
// bf16, and F16 weights too (bf16 keeps 8 significant bits against f16's 11; unit roundoff 2^-8):
// each product then has a relative error up to about 2^-7 (F16) or 2^-8 (BF16 weights, which lose
// nothing), so a dot product's error is bounded by that times sum |w x| plus the f32 accumulation
// error ((cols + 1) * 2^-24 * sum |w x|), where f32_fma has only the accumulation error. f32_fma
// stays selectable for accuracy. amx_bf16 rounds the same operands the same way and multiplies them
// on AMX bf16 tiles (TDPBF16PS, amx_bf16_kernel.h) at every token count; its sums run in another
// order than bf16_dot's (per 16-pair K tile two chains, then added), so the two differ in the last
// bits and are separate methods. It runs where amx_bf16_tiles_run_here() (AMX-BF16 and the OS tile
// permission, PAGODA_AMX not 0, the avx512 path; or the emulation hook, for tests).
// Initially bf16_dot when the CPU has AVX-512 BF16 and the best ISA is avx512, otherwise f32_fma (a
// profile from `pagoda tune` chooses amx_bf16 where it measured it faster);
// PAGODA_FLOAT_METHOD=f32_fma|bf16_dot|amx_bf16 overrides (any other value throws). Setting a method
// the CPU cannot run is allowed: packing then keeps the plain view (f32 FMA).
enum class FloatMethod { f32_fma, bf16_dot, amx_bf16 };
FloatMethod float_method();
void set_float_method(FloatMethod m);
const char* float_method_name(FloatMethod m);
// True when packing F16 / BF16 weights now would produce bf16 panels (method, CPU and active ISA).
bool bf16_kernel_available();
// True when packing F16 / BF16 weights now would produce AMX bf16 tile panels: float_method() is
// amx_bf16 and amx_bf16_tiles_run_here().
bool bf16_tiles_available();
bool amx_bf16_tiles_run_here();
uint64_t amx_bf16_dispatch_count();  // matmuls that took the AMX bf16 tiles since start (for tests)

// Path selection for the calling thread: while set (kernel_plan.h's ScopedKernelChoice does it around
// each matmul of the CPU backend), quant_method(), float_method() and gemm_tiles() return these on
// this thread instead of the process-wide values. Empty members leave the process-wide value.
struct CallPaths {
    std::optional<QuantMethod> quant;
    std::optional<FloatMethod> fl;
    std::optional<GemmTiles> tiles;
    std::optional<int64_t> amx_min_tokens;
    std::optional<int64_t> wide_min_tokens;
};
CallPaths call_paths();
void set_call_paths(const CallPaths& paths);

// AMX int8 tiles on the packed int8 path (detail: matmul_amx.h, amx_kernel.h): bitwise the results of
// the VNNI panels, so the packed matmul takes them for steps of at least amx_min_tokens() tokens
// without breaking batch invariance, where amx_available() (core/cpu_features.h: CPUID, OS
// permission, PAGODA_AMX). Below the threshold (decode) the VNNI kernel streams the weights.
constexpr int64_t kDefaultAmxMinTokens = 32;
int64_t amx_min_tokens();  // the calling thread's CallPaths value (the kernel plan's), else the default
// The AVX-512 VNNI panel path takes its wide prefill kernel (packed_kernel_wide.h; bitwise the narrow
// kernel's results, so the choice by token count keeps batch invariance) for steps of at least
// wide_min_tokens() tokens; steps of up to 16 tokens (decode, batched decode) always stream the
// weights through the narrow kernel, so values below kDefaultWideMinTokens act as it.
constexpr int64_t kDefaultWideMinTokens = 17;
int64_t wide_min_tokens();  // the calling thread's CallPaths value (the kernel plan's), else the default
// The largest threshold a plan or profile holds (AMX, wide kernel): no step in practice reaches it.
constexpr int64_t kNeverMinTokens = int64_t(1) << 30;
// Test hook: the AMX path runs on the emulated tiles (amx_tiles.h), also on CPUs without AMX; still
// only where amx_enabled() (PAGODA_AMX=0 keeps it off).
void set_amx_emulation(bool on);
bool amx_emulation();
// AMX would be taken for large enough steps now: the packed int8 path is active, amx_enabled(), and
// the hardware runs it (or the emulation hook is on).
bool amx_path_available();
uint64_t amx_dispatch_count();  // packed matmuls that took the AMX path since start (for tests)
uint64_t wide_dispatch_count();  // packed matmuls that took the wide prefill kernel since start (for tests)

// One line naming the ISA path and quantised method in use, e.g. "matmul: avx512 (...), quantised
// weights: int8 dot (vpdpbusd)"; log_kernel_paths() logs it once at info level.
std::string describe_kernel_paths();
void log_kernel_paths();

}  // namespace pagoda::backend::cpu
