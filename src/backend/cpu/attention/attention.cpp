// Paged attention: argument checks, ISA dispatch and the (query run, KV head) task split.
#include "backend/cpu/attention/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "backend/cpu/attention/attention_internal.h"
#include "backend/cpu/matmul/matmul.h"

namespace pagoda::backend::cpu {

using attention_detail::Task;

namespace {

using AttendFn = void (*)(const Task&);

AttendFn pick_path() {
    switch (active_isa()) {
        case Isa::avx512: return attention_detail::attend_avx512;
        case Isa::avx2: return attention_detail::attend_avx2;
        case Isa::scalar: break;
    }
    return attention_detail::attend_scalar;
}

void validate(const PagedAttentionBatch& b, const cpu::KvPool& pool, int32_t layer, const float* out) {
    const kv::KvLayout& L = pool.layout();
    if (layer < 0 || layer >= L.n_layers) fail("paged attention: layer {} out of range 0..{}", layer, L.n_layers - 1);
    if (b.n_tokens < 0) fail("paged attention: negative token count {}", b.n_tokens);
    if (b.n_heads <= 0 || b.n_heads % L.n_kv_heads != 0)
        fail("paged attention: {} query heads is not a positive multiple of {} KV heads", b.n_heads, L.n_kv_heads);
    if (!std::isfinite(b.scale)) fail("paged attention: scale {} is not finite", b.scale);
    if (b.sliding_window < 0) fail("paged attention: sliding window {} is negative", b.sliding_window);
    if (!(b.softcap >= 0) || !std::isfinite(b.softcap)) fail("paged attention: soft cap {} is not >= 0", b.softcap);
    if (b.n_tokens == 0) return;
    if (!b.q || !out || !b.token_seq || !b.token_pos || !b.seqs) fail("paged attention: missing input array");
    if (b.alibi_slopes && !b.query_pos) fail("paged attention: ALiBi slopes without query positions");
    if (b.n_tokens * L.n_kv_heads > std::numeric_limits<int>::max())
        fail("paged attention: {} tokens x {} KV heads is too many tasks", b.n_tokens, L.n_kv_heads);
    // The furthest and (under a window) the nearest position each sequence is read at; every block
    // between must be in the pool (blocks wholly below every window may have been freed).
    std::vector<int64_t> max_pos(size_t(std::max(b.n_seqs, 0)), -1);
    std::vector<int64_t> min_key(size_t(std::max(b.n_seqs, 0)), std::numeric_limits<int64_t>::max());
    for (int64_t t = 0; t < b.n_tokens; ++t) {
        int32_t s = b.token_seq[t];
        if (s < 0 || s >= b.n_seqs) fail("paged attention: token {} names sequence {} of {}", t, s, b.n_seqs);
        int32_t p = b.token_pos[t];
        if (p < 0 || int64_t(p) >= int64_t(b.seqs[s].n_blocks) * L.block_size)
            fail("paged attention: token {} position {} outside sequence {} ({} blocks of {})", t, p, s,
                 b.seqs[s].n_blocks, L.block_size);
        max_pos[size_t(s)] = std::max<int64_t>(max_pos[size_t(s)], p);
        const int64_t lo = b.sliding_window <= 0 ? 0
                           : b.first_key     ? int64_t(b.first_key[t])
                                             : std::max<int64_t>(0, int64_t(p) - b.sliding_window + 1);
        if (lo < 0 || lo > p) fail("paged attention: token {} reads keys from {} to its position {}", t, lo, p);
        min_key[size_t(s)] = std::min(min_key[size_t(s)], lo);
    }
    for (int32_t s = 0; s < b.n_seqs; ++s) {
        if (max_pos[size_t(s)] < 0) continue;
        if (!b.seqs[s].block_table) fail("paged attention: sequence {} has no block table", s);
        for (int64_t i = min_key[size_t(s)] / L.block_size; i <= max_pos[size_t(s)] / L.block_size; ++i) {
            int32_t blk = b.seqs[s].block_table[i];
            if (blk < 0 || blk >= pool.n_blocks())
                fail("paged attention: sequence {} block {} is {}, outside the pool of {}", s, i, blk, pool.n_blocks());
        }
    }
}

// A task's queries: `count` consecutive batch tokens from `first`, of one sequence, with
// non-decreasing positions (equal ones: non-causal attention, where each token of a sequence is
// handed the sequence's last position).
struct QueryRun {
    int64_t first;
    int32_t count;
};

// Splits the batch into runs of consecutive tokens of one sequence with non-decreasing positions (the
// prefill / chunked-prefill case), each at most `max_len` long; decode tokens become runs of one.
// Heaviest first (the furthest last position: causal work grows with it) so the pool's dynamic
// claiming ends with the small tasks.
std::vector<QueryRun> split_runs(const PagedAttentionBatch& b, int32_t max_len) {
    std::vector<QueryRun> runs;
    for (int64_t t = 0; t < b.n_tokens;) {
        int32_t len = 1;
        while (len < max_len && t + len < b.n_tokens && b.token_seq[t + len] == b.token_seq[t] &&
               b.token_pos[t + len] >= b.token_pos[t + len - 1])
            ++len;
        runs.push_back({t, len});
        t += len;
    }
    std::stable_sort(runs.begin(), runs.end(), [&](const QueryRun& x, const QueryRun& y) {
        return b.token_pos[x.first + x.count - 1] > b.token_pos[y.first + y.count - 1];
    });
    return runs;
}

// Decode runs (listed in `decode`: indices into runs) whose sequences share leading blocks, in
// groups of 2..kMaxShareSeqs that walk their shared keys together (attention_internal.h:
// DecodeShare): the runs whose first block is the same, each group's shared keys the whole tiles
// that all of its members' tables agree on and all of its tokens see. Runs that share less than a
// tile with their group's first are left out of it.
struct ShareGroup {
    std::vector<int32_t> runs;
    int32_t shared = 0;
};
std::vector<ShareGroup> share_groups(const PagedAttentionBatch& b, const std::vector<QueryRun>& runs,
                                     std::vector<int32_t> decode, int32_t block_size) {
    constexpr int32_t kTile = kAttentionTile;
    auto table = [&](int32_t r) { return b.seqs[b.token_seq[runs[size_t(r)].first]].block_table; };
    auto keys = [&](int32_t r) { return b.token_pos[runs[size_t(r)].first] + 1; };
    // Keys of whole tiles that runs x and y read from the same blocks.
    auto common = [&](int32_t x, int32_t y) {
        const int32_t limit = std::min(keys(x), keys(y)) / kTile * kTile;
        const int32_t* tx = table(x);
        const int32_t* ty = table(y);
        int32_t same = 0;
        while (same < limit && tx[same / block_size] == ty[same / block_size]) same += block_size;
        return std::min(same, limit) / kTile * kTile;
    };
    std::stable_sort(decode.begin(), decode.end(), [&](int32_t x, int32_t y) { return table(x)[0] < table(y)[0]; });
    std::vector<ShareGroup> groups;
    for (size_t i = 0; i < decode.size();) {
        size_t j = i + 1;
        while (j < decode.size() && table(decode[j])[0] == table(decode[i])[0]) ++j;
        for (size_t lead = i; lead < j;) {  // groups of at most kMaxShareSeqs
            ShareGroup g;
            g.runs.push_back(decode[lead]);
            g.shared = std::numeric_limits<int32_t>::max();
            size_t k = lead + 1;
            for (; k < j && int(g.runs.size()) < attention_detail::kMaxShareSeqs; ++k) {
                const int32_t c = common(decode[lead], decode[k]);
                if (c < kTile) continue;
                g.runs.push_back(decode[k]);
                g.shared = std::min(g.shared, c);
            }
            if (g.runs.size() > 1) groups.push_back(std::move(g));
            lead = k;
        }
        i = j;
    }
    return groups;
}

}  // namespace

void validate_paged_attention(const PagedAttentionBatch& b, const KvPool& pool, int32_t layer, const float* out) {
    validate(b, pool, layer, out);
}

namespace {
std::atomic<int> g_attention_method{-1};  // -1: nothing installed
std::atomic<uint64_t> g_amx_attention_dispatch{0};
}  // namespace

AttentionMethod attention_method() {
    if (const int v = g_attention_method.load(); v >= 0) return AttentionMethod(v);
    if (const char* env = std::getenv("PAGODA_ATTENTION"); env && *env) {
        if (auto m = parse_attention_method(env)) return *m;
        fail("PAGODA_ATTENTION={} is not one of simd, amx_bf16", env);
    }
    return AttentionMethod::simd;
}

void set_attention_method(std::optional<AttentionMethod> m) { g_attention_method.store(m ? int(*m) : -1); }

std::optional<AttentionMethod> installed_attention_method() {
    const int v = g_attention_method.load();
    return v >= 0 ? std::optional<AttentionMethod>(AttentionMethod(v)) : std::nullopt;
}

bool attention_method_in_environment() {
    const char* env = std::getenv("PAGODA_ATTENTION");
    return env && *env;
}

namespace {
std::atomic<int> g_decode_kv_prefetch{-1};  // -1: nothing installed
}  // namespace

bool decode_kv_prefetch() {
    if (const int v = g_decode_kv_prefetch.load(std::memory_order_relaxed); v >= 0) return v == 1;
    const char* env = std::getenv("PAGODA_DECODE_PREFETCH");
    if (!env || !*env) return false;
    if (std::string_view(env) != "0" && std::string_view(env) != "1")
        fail("PAGODA_DECODE_PREFETCH={} is not 0 or 1", env);
    return env[0] == '1';
}

void set_decode_kv_prefetch(std::optional<bool> on) { g_decode_kv_prefetch.store(on ? int(*on) : -1); }

bool decode_kv_prefetch_in_environment() {
    const char* env = std::getenv("PAGODA_DECODE_PREFETCH");
    return env && *env;
}

bool amx_attention_runs_here() { return amx_bf16_tiles_run_here(); }

bool amx_attention_applies(kv::KvDtype dtype, int32_t sliding_window, float softcap) {
    return amx_attention_applies(attention_method(), dtype, sliding_window, softcap);
}

bool amx_attention_applies(AttentionMethod method, kv::KvDtype dtype, int32_t sliding_window, float softcap) {
    return method == AttentionMethod::amx_bf16 && amx_attention_runs_here() &&
           (dtype == kv::KvDtype::f16 || dtype == kv::KvDtype::bf16) &&
           sliding_window == 0 && softcap == 0.0f;
}

uint64_t amx_attention_dispatch_count() { return g_amx_attention_dispatch.load(std::memory_order_relaxed); }

int32_t attention_query_tile(int32_t group) {
    return std::clamp<int32_t>(kAttentionQueryHeads / std::max<int32_t>(group, 1), 1, kAttentionMaxQueryTile);
}

namespace {

// Fills the fields of a task for run `run` x KV head `kv_head` that both methods share.
Task make_task(const PagedAttentionBatch& b, const cpu::KvPool& pool, int32_t layer, float* out,
               const QueryRun& run, int32_t kv_head, int32_t shift) {
    const kv::KvLayout& L = pool.layout();
    const int32_t group = b.n_heads / L.n_kv_heads;
    const int32_t d = L.head_dim;
    const size_t token_stride = size_t(b.n_heads) * size_t(d);
    const AttentionSeq& seq = b.seqs[b.token_seq[run.first]];
    const size_t head_offset = size_t(run.first) * token_stride + size_t(kv_head) * size_t(group) * d;
    Task t;
    t.q = b.q + head_offset;
    t.out = out + head_offset;
    t.token_stride = token_stride;
    t.pos = b.token_pos + run.first;
    t.n_queries = run.count;
    t.group = group;
    t.head_dim = d;
    t.block_table = seq.block_table;
    t.block_shift = shift;
    t.k_head = pool.k_data(layer) + size_t(kv_head) * L.head_block_bytes();
    t.v_head = pool.v_data(layer) + size_t(kv_head) * L.head_block_bytes();
    t.block_stride = L.layer_block_bytes();
    t.row_bytes = L.row_bytes();
    t.dtype = L.dtype;
    t.scale = b.scale;
    t.window = b.sliding_window;
    t.first_key = b.first_key ? b.first_key + run.first : nullptr;
    t.alibi_slopes = b.alibi_slopes ? b.alibi_slopes + size_t(kv_head) * size_t(group) : nullptr;
    t.query_pos = b.query_pos ? b.query_pos + run.first : nullptr;
    t.softcap = b.softcap;
    t.sinks = b.sinks ? b.sinks + size_t(kv_head) * size_t(group) : nullptr;
    t.head_bytes = L.head_block_bytes();
    return t;
}

// The amx_bf16 method: a task per (query run, KV head), its query heads in 16-row A tiles
// (amx_attention.h). Decode tokens are runs of one like any other.
void paged_attention_amx(const PagedAttentionBatch& b, const cpu::KvPool& pool, int32_t layer, float* out,
                         ThreadPool& threads, int32_t shift) {
    g_amx_attention_dispatch.fetch_add(1, std::memory_order_relaxed);
    const kv::KvLayout& L = pool.layout();
    const int32_t group = b.n_heads / L.n_kv_heads;
    const std::vector<QueryRun> runs = split_runs(b, attention_detail::amx_query_tile(group));
    int32_t longest = 1;
    for (const QueryRun& r : runs) longest = std::max(longest, r.count);
    const size_t stride = (attention_detail::amx_scratch_layout(longest * group, L.head_dim).total + 15) / 16 * 16;
    thread_local AlignedBuffer<float> scratch;
    if (scratch.size() < stride * size_t(threads.size())) scratch.resize(stride * size_t(threads.size()));
    float* const scratch_base = scratch.data();
    // The hook wins where both could run: it exists to test the emulated trait.
    const AttendFn attend = amx_emulation() ? attention_detail::attend_amx_emulated : attention_detail::attend_amx_hardware;
    const int32_t n_kv = L.n_kv_heads;
    const bool kv_ahead = b.decode_kv_prefetch ? *b.decode_kv_prefetch : decode_kv_prefetch();
    threads.run(int(runs.size()) * n_kv, [&](int task, int thread) {
        Task t = make_task(b, pool, layer, out, runs[size_t(task / n_kv)], task % n_kv, shift);
        t.scratch = scratch_base + size_t(thread) * stride;
        t.kv_ahead = kv_ahead;
        attend(t);
    });
}

}  // namespace

void paged_attention(const PagedAttentionBatch& b, const cpu::KvPool& pool, int32_t layer, float* out,
                     ThreadPool& threads) {
    validate(b, pool, layer, out);
    if (b.n_tokens == 0) return;
    const kv::KvLayout& L = pool.layout();
    const int32_t n_kv = L.n_kv_heads;
    const int32_t group = b.n_heads / n_kv;
    const int32_t d = L.head_dim;
    int32_t shift = 0;
    while ((int32_t(1) << shift) < L.block_size) ++shift;

    const AttentionMethod method = b.method ? *b.method : attention_method();
    if (!b.sinks && !b.alibi_slopes && amx_attention_applies(method, L.dtype, b.sliding_window, b.softcap))
        return paged_attention_amx(b, pool, layer, out, threads, shift);
    const AttendFn attend = pick_path();
    const int32_t query_tile = attention_query_tile(group);
    const std::vector<QueryRun> runs = split_runs(b, query_tile);
    int32_t longest = 1;
    for (const QueryRun& r : runs) longest = std::max(longest, r.count);
    // Tasks: a KV head of a run each, except decode tokens whose heads read the cache in place:
    // they walk several KV heads at once (walk_decode_heads reads one block of all of them as a
    // sequential run), as many as still leave a task per thread (measured: 6 heads a task read a
    // 1024-token context 5-8 % faster than 3; the pool's workers are spinning between a decode
    // step's regions, so each claims its task at once).
    // Whether the path scores two query heads at a time (what Avx512Ops::scores_pairs says; restated
    // here, as a shared inline function would be compiled with that file's ISA flags too).
    const bool pair_scores = active_isa() == Isa::avx512 && (d == 64 || d == 96 || d == 128);
    const bool decode_in_place = !b.alibi_slopes && attention_detail::reads_in_place(L.dtype, group, pair_scores);
    std::vector<int32_t> decode;  // the runs of one decode token read in place
    for (size_t r = 0; r < runs.size(); ++r)
        if (decode_in_place && runs[r].count == 1) decode.push_back(int32_t(r));
    // Decode tokens of sequences that share leading blocks walk the shared keys together (without a
    // window: each token's keys then start at 0).
    std::vector<ShareGroup> groups;
    if (b.sliding_window == 0 && decode.size() > 1) groups = share_groups(b, runs, decode, L.block_size);
    std::vector<int32_t> share_of(runs.size(), -1);
    for (size_t g = 0; g < groups.size(); ++g)
        for (int32_t r : groups[g].runs) share_of[size_t(r)] = int32_t(g);
    int64_t decode_units = int64_t(groups.size());  // a group's task walks like one token's, and more
    for (int32_t r : decode) decode_units += share_of[size_t(r)] < 0;
    const int32_t decode_heads = int32_t(std::clamp<int64_t>(decode_units * n_kv / int64_t(threads.size()), 1,
                                                             std::min(n_kv, attention_detail::kMaxDecodeHeads)));
    struct TaskSpec {
        int32_t run, kv_head, kv_heads;  // kv_heads 0: one head, walk_tiles
        int32_t share = -1;              // >= 0: the group's KV heads (run: its first)
    };
    std::vector<TaskSpec> tasks;
    // Scratch query heads a task needs at most: a run's tokens x group, or the decode heads of one
    // token or of a group's tokens.
    int32_t scratch_queries = std::max(longest, decode_heads);
    for (size_t g = 0; g < groups.size(); ++g) {  // the groups first: the heaviest tasks
        const int32_t m = int32_t(groups[g].runs.size());
        // At most kMaxShareHeads query heads a task, so its heads' scores, sums and rows stay near L1.
        const int32_t heads = std::clamp<int32_t>(attention_detail::kMaxShareHeads / (m * group), 1, decode_heads);
        for (int32_t h = 0; h < n_kv; h += heads)
            tasks.push_back({groups[g].runs[0], h, std::min(heads, n_kv - h), int32_t(g)});
        scratch_queries = std::max(scratch_queries, m * heads);
    }
    for (size_t r = 0; r < runs.size(); ++r) {
        if (share_of[r] >= 0) continue;
        if (decode_in_place && runs[r].count == 1) {
            for (int32_t h = 0; h < n_kv; h += decode_heads) tasks.push_back({int32_t(r), h, std::min(decode_heads, n_kv - h)});
        } else {
            for (int32_t h = 0; h < n_kv; ++h) tasks.push_back({int32_t(r), h, 0});
        }
    }
    const size_t scratch_stride = (attention_detail::scratch_floats(scratch_queries, group, d) + 15) / 16 * 16;
    // Kept per calling thread across calls (the kernel runs once per layer and step; allocating
    // and zeroing the K/V tiles each time would cost decode a measurable share).
    thread_local AlignedBuffer<float> scratch;
    if (scratch.size() < scratch_stride * size_t(threads.size())) scratch.resize(scratch_stride * size_t(threads.size()));
    float* const scratch_base = scratch.data();  // the workers' own thread_local is another buffer

    const bool kv_ahead = b.decode_kv_prefetch ? *b.decode_kv_prefetch : decode_kv_prefetch();
    auto task_of = [&](const TaskSpec& spec, int32_t run_index, int thread) {
        Task t = make_task(b, pool, layer, out, runs[size_t(run_index)], spec.kv_head, shift);
        t.scratch = scratch_base + size_t(thread) * scratch_stride;
        t.kv_heads = spec.kv_heads;
        t.kv_ahead = kv_ahead;
        return t;
    };
    threads.run(int(tasks.size()), [&](int task, int thread) {
        const TaskSpec& spec = tasks[size_t(task)];
        if (spec.share < 0) return attend(task_of(spec, spec.run, thread));
        const ShareGroup& g = groups[size_t(spec.share)];
        Task members[attention_detail::kMaxShareSeqs];
        for (size_t i = 0; i < g.runs.size(); ++i) members[i] = task_of(spec, g.runs[i], thread);
        const attention_detail::DecodeShare share{members, int32_t(g.runs.size()), g.shared};
        members[0].share = &share;
        attend(members[0]);
    });
}

}  // namespace pagoda::backend::cpu
