// How fast causal prefill attention could run on AMX bf16 tiles (docs/benchmarks.md, the AMX host
// section): one head, head_dim 64, a prompt of N tokens (default 2048) with its K and V stored as
// f16 (as the KV cache holds them), on one thread. Scores Q.K^T and the product P.V run on
// TDPBF16PS (Q, K, P, V rounded to bf16); the online softmax (scale, causal mask, running max and
// sum, exp, the output's rescaling) runs on AVX-512 between them, 16 queries x 32 keys at a time.
// The preparation a head's keys and values need once per prompt (K transposed into B tiles, V rows
// interleaved in pairs) is inside the timing. Prints GFLOP/s counting the causal multiply-adds
// (4 * head_dim per query-key pair) and the largest error against a double-precision reference on
// a sample of queries. Not part of pagoda: a measurement of the headroom for an attention method on
// AMX, to compare with `pagoda_bench --benchmark_filter=BM_PagedAttentionPrefillF16/2048/12/12/64`
// (with PAGODA_BENCH_THREADS=1 for one thread). AMX hosts only.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 bench/amx_attention_bench.cpp -o /tmp/amx_att && /tmp/amx_att [N]
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kDim = 64;

struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

uint16_t bf16_of(float f) {  // nearest even (no NaNs here)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
uint32_t pair(float lo, float hi) { return uint32_t(bf16_of(lo)) | uint32_t(bf16_of(hi)) << 16; }

// e^x for x <= 0 (scores minus their running max), |relative error| < 2e-7 on the range used.
inline __m512 exp_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.f));
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f));
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), f);
    // The Taylor series of e^r to degree 6 (|r| <= ln 2 / 2), by Horner's rule.
    static constexpr float kTaylor[] = {1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f};
    __m512 p = _mm512_set1_ps(kTaylor[0]);
    for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kTaylor[i]));
    return _mm512_scalef_ps(p, n);
}

struct Head {
    int n;
    std::vector<float> q;      // [n][64] f32
    std::vector<uint16_t> k, v;  // [n][64] f16 bits, as the cache stores them
};

// Operands in tile layout (64-byte aligned).
struct Operands {
    uint32_t* aq;  // [n/16][2 halves][16 queries][16 pairs]
    uint32_t* kt;  // [n/16 key tiles][2 halves][16 dim pairs][16 keys]
    uint32_t* vp;  // [n/32 key blocks][4 dim groups][16 key pairs][16 dims]
};

float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

// Once per head and prompt: K transposed into B tiles, V interleaved by key pairs, Q rounded.
void prepare(const Head& h, Operands& o) {
    const int n = h.n;
    for (int t = 0; t < n; ++t)
        for (int p = 0; p < 32; ++p) {
            const int tile = t / 16, half = p / 16, row = t % 16, col = p % 16;
            o.aq[((tile * 2 + half) * 16 + row) * 16 + col] = pair(h.q[t * kDim + 2 * p], h.q[t * kDim + 2 * p + 1]);
        }
    for (int key = 0; key < n; ++key) {
        float kr[kDim];
        for (int d = 0; d < kDim; ++d) kr[d] = f16_to_f32(h.k[key * kDim + d]);
        for (int p = 0; p < 32; ++p) {
            const int tile = key / 16, half = p / 16, row = p % 16, col = key % 16;
            o.kt[((tile * 2 + half) * 16 + row) * 16 + col] = pair(kr[2 * p], kr[2 * p + 1]);
        }
    }
    for (int kp = 0; kp < n / 2; ++kp)
        for (int d = 0; d < kDim; ++d) {
            const int blk = kp / 16, row = kp % 16, group = d / 16, col = d % 16;
            o.vp[((blk * 4 + group) * 16 + row) * 16 + col] =
                pair(f16_to_f32(h.v[(2 * kp) * kDim + d]), f16_to_f32(h.v[(2 * kp + 1) * kDim + d]));
        }
}

// out: [n][64]. Tiles 0-3: the P.V block (16 queries x 64 dims); 4: A (Q half or P); 5: B; 6, 7: scores.
void attend(const Operands& o, int n, float scale, float* out) {
    alignas(64) float s[16][32];
    alignas(64) uint32_t ap[16][16];
    alignas(64) float c[16][kDim];
    alignas(64) float acc[16][kDim];
    float m[16], l[16], alpha[16];
    for (int qt = 0; qt < n / 16; ++qt) {
        for (int r = 0; r < 16; ++r) m[r] = -INFINITY, l[r] = 0.f;
        std::memset(acc, 0, sizeof acc);
        const int last_key = qt * 16 + 15;
        for (int kb = 0; kb * 32 <= last_key; ++kb) {
            _tile_zero(6);
            _tile_zero(7);
            for (int half = 0; half < 2; ++half) {
                _tile_loadd(4, o.aq + (qt * 2 + half) * 256, 64);
                _tile_loadd(5, o.kt + ((2 * kb) * 2 + half) * 256, 64);
                _tile_dpbf16ps(6, 4, 5);
                _tile_loadd(5, o.kt + ((2 * kb + 1) * 2 + half) * 256, 64);
                _tile_dpbf16ps(7, 4, 5);
            }
            _tile_stored(6, &s[0][0], 128);
            _tile_stored(7, &s[0][16], 128);
            asm volatile("" ::: "memory");  // the stores above write s
            const bool diagonal = kb * 32 + 31 > qt * 16;
            // Pass 1: each row's scaled, masked scores and its new running max; then the 16 rows'
            // rescaling factors in one vector exp.
            alignas(64) float mnew[16];
            for (int r = 0; r < 16; ++r) {
                __m512 x0 = _mm512_mul_ps(_mm512_load_ps(&s[r][0]), _mm512_set1_ps(scale));
                __m512 x1 = _mm512_mul_ps(_mm512_load_ps(&s[r][16]), _mm512_set1_ps(scale));
                if (diagonal) {  // keys after the query see -inf
                    const int q = qt * 16 + r, k0 = kb * 32;
                    const int allowed = q - k0 + 1;  // keys k0 .. q
                    const __mmask16 m0 = allowed >= 16 ? 0xffff : allowed <= 0 ? 0 : __mmask16((1u << allowed) - 1);
                    const __mmask16 m1 = allowed >= 32 ? 0xffff : allowed <= 16 ? 0 : __mmask16((1u << (allowed - 16)) - 1);
                    x0 = _mm512_mask_blend_ps(m0, _mm512_set1_ps(-INFINITY), x0);
                    x1 = _mm512_mask_blend_ps(m1, _mm512_set1_ps(-INFINITY), x1);
                }
                _mm512_store_ps(&s[r][0], x0);
                _mm512_store_ps(&s[r][16], x1);
                mnew[r] = std::max(m[r], _mm512_reduce_max_ps(_mm512_max_ps(x0, x1)));
            }
            const __m512 mv = _mm512_loadu_ps(m), mn = _mm512_load_ps(mnew);
            // The first block: m = -inf, so alpha = 0 (nothing to rescale).
            const __m512 av = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mv, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ),
                                                   exp_ps(_mm512_sub_ps(mv, mn)), _mm512_setzero_ps());
            _mm512_storeu_ps(alpha, av);
            _mm512_storeu_ps(m, mn);
            // Pass 2: probabilities, their sums, and the P rows in bf16.
            alignas(64) float rowsum[16];
            for (int r = 0; r < 16; ++r) {
                const __m512 mx = _mm512_set1_ps(mnew[r]);
                const __m512 p0 = exp_ps(_mm512_sub_ps(_mm512_load_ps(&s[r][0]), mx));
                const __m512 p1 = exp_ps(_mm512_sub_ps(_mm512_load_ps(&s[r][16]), mx));
                rowsum[r] = _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
                _mm512_store_si512(ap[r], (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
            }
            _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), av, _mm512_load_ps(rowsum)));
            asm volatile("" ::: "memory");  // ap is written before the tile load reads it
            _tile_loadd(4, &ap[0][0], 64);
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            _tile_loadd(5, o.vp + (kb * 4 + 0) * 256, 64);
            _tile_dpbf16ps(0, 4, 5);
            _tile_loadd(5, o.vp + (kb * 4 + 1) * 256, 64);
            _tile_dpbf16ps(1, 4, 5);
            _tile_loadd(5, o.vp + (kb * 4 + 2) * 256, 64);
            _tile_dpbf16ps(2, 4, 5);
            _tile_loadd(5, o.vp + (kb * 4 + 3) * 256, 64);
            _tile_dpbf16ps(3, 4, 5);
            _tile_stored(0, &c[0][0], kDim * 4);
            _tile_stored(1, &c[0][16], kDim * 4);
            _tile_stored(2, &c[0][32], kDim * 4);
            _tile_stored(3, &c[0][48], kDim * 4);
            asm volatile("" ::: "memory");
            for (int r = 0; r < 16; ++r) {
                const __m512 a = _mm512_set1_ps(alpha[r]);
                for (int g = 0; g < 4; ++g)
                    _mm512_store_ps(&acc[r][16 * g], _mm512_fmadd_ps(_mm512_load_ps(&acc[r][16 * g]), a, _mm512_load_ps(&c[r][16 * g])));
            }
        }
        for (int r = 0; r < 16; ++r)
            for (int d = 0; d < kDim; ++d) out[(qt * 16 + r) * kDim + d] = acc[r][d] / l[r];
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) / 32 * 32 : 2048;
    if (n < 32) return std::fprintf(stderr, "N must be at least 32\n"), 1;
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0)
        return std::fprintf(stderr, "the OS refused the AMX tile permission (or this CPU has no AMX)\n"), 1;
    Head h{n, std::vector<float>(size_t(n) * kDim), std::vector<uint16_t>(size_t(n) * kDim), std::vector<uint16_t>(size_t(n) * kDim)};
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : h.q) x = nd(rng);
    for (auto& x : h.k) x = _cvtss_sh(nd(rng), 0);
    for (auto& x : h.v) x = _cvtss_sh(nd(rng), 0);
    auto alloc = [](size_t dwords) { return static_cast<uint32_t*>(std::aligned_alloc(64, dwords * 4)); };
    Operands o{alloc(size_t(n) * 32), alloc(size_t(n) * 32), alloc(size_t(n) * 32)};
    std::vector<float> out(size_t(n) * kDim);
    const float scale = 1.f / std::sqrt(float(kDim));
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    const double flops = 4.0 * kDim * double(n) * double(n + 1) / 2;
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
        const double t0 = seconds();
        prepare(h, o);
        attend(o, n, scale, out.data());
        best = std::min(best, seconds() - t0);
    }
    _tile_release();
    double worst = 0;
    for (int q : {0, 1, 17, n / 3, n / 2 + 5, n - 1}) {
        std::vector<double> w(size_t(q) + 1);
        double mx = -1e300, sum = 0;
        for (int k = 0; k <= q; ++k) {
            double d = 0;
            for (int i = 0; i < kDim; ++i) d += double(h.q[q * kDim + i]) * f16_to_f32(h.k[k * kDim + i]);
            w[size_t(k)] = d * scale;
            mx = std::max(mx, w[size_t(k)]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int i = 0; i < kDim; ++i) {
            double ref = 0;
            for (int k = 0; k <= q; ++k) ref += w[size_t(k)] / sum * f16_to_f32(h.v[k * kDim + i]);
            worst = std::max(worst, std::fabs(ref - out[size_t(q) * kDim + i]));
        }
    }
    std::printf("AMX bf16 causal attention, one head of dim 64, %d tokens, one thread: %.2f ms, %.0f GFLOP/s "
                "(preparation included); largest error against double on 6 queries %.2e\n",
                n, best * 1e3, flops / best / 1e9, worst);
    return 0;
}
