// Paged causal attention over the KV cache (FlashAttention-style, CPU).
//
// For each query token t (of any sequence in the batch) and each query head h:
//     out[t][h] = sum_j softmax_j(scale * q[t][h] . K[j]) * V[j],  j = 0 .. pos[t]
// where K/V rows are those of KV head h / (n_heads / n_kv_heads) (GQA: no K/V duplication), read
// from the pool's blocks through the token's sequence block table (position j lives in block
// table[j / block_size], slot j % block_size).
//
// Non-causal attention (encoders) is the same call with every token of a sequence given the
// sequence's last position (the backend does it: each then sees all of the sequence's keys).
//
// Work is split into tasks of (query run, KV head): a query run is up to attention_query_tile()
// consecutive batch tokens of one sequence with non-decreasing positions (a prefill or chunked-prefill
// chunk; positions need not be contiguous, the batch may mix sequences; a decode token is a run of
// one). A task walks the keys 0..(its last position) in tiles of kAttentionTile absolute positions,
// converts each tile's K and V rows to f32 once and uses them for all its query heads: the scores
// are a small queries x keys product, then an online softmax per query head (running max and sum,
// accumulator rescaled when the max grows, F32 accumulation), then P.V; each query only sees keys
// <= its own position. No score row longer than a tile is ever materialised. Tasks are claimed
// dynamically from the ThreadPool, longest runs first. A decode token whose heads read the cache
// rows in place (no widening to f32) is one task per several KV heads instead, walked 16 keys of
// every head in turn, which reads one block of all of them as a sequential run; per head the
// arithmetic is the same (attention_walk.h). Decode tokens (without a sliding window) of sequences
// whose block tables name the same blocks for their first keys — a prompt prefix the prefix cache
// shares — walk those keys' whole tiles together, up to 8 tokens a task, so each shared row is read
// once a step rather than once a sequence; again each head's arithmetic is the one it gets alone.
//
// Batch invariance: the arithmetic of one (token, head) — which tiles, how many keys of each, the
// order every dot product and every accumulator element is reduced in — depends only on that
// token's position, the head size, the block table contents and the ISA path, never on the other
// tokens of its run or batch nor on the thread count. So a token's output is bitwise identical
// decoded alone, inside any prefill batch, or chunked differently, for a given ISA path.
//
// Attention sinks (gpt-oss): each head's sink logit joins its softmax denominator at normalisation,
// after the walk; nothing else changes, so the invariance holds with them too.
//
// Sliding window (Mistral, Gemma): each query walks only the tiles that hold its window and starts
// inside the first at its window's first key; soft cap (Gemma 2): each score is capped with tanh
// before the softmax. Both keep the batch invariance above (they depend on the token's position).
//
// The SIMD path (scalar / AVX2 / AVX-512) follows pagoda::active_isa(); any head_dim >= 1, any
// block size the KV layout allows, KV stored as f32, f16, bf16 or q8 (int8 rows read in place,
// each scaled by its own row scale; see attention_walk.h), GQA (n_heads a multiple of n_kv_heads).
// The KV of every position 0..pos[t] must already be written (KvPool::write) for the layer,
// including the tokens of this very batch.
#pragma once
#include <cstdint>
#include <optional>

#include "core/thread_pool.h"
#include "backend/cpu/plan/attention_method.h"
#include "backend/cpu/kv/kv_pool.h"

namespace pagoda::backend::cpu {

constexpr int32_t kAttentionTile = 64;          // key positions per online-softmax tile
constexpr int32_t kAttentionMaxQueryTile = 64;  // most tokens per task
constexpr int32_t kAttentionQueryHeads = 128;   // query heads per task aimed for (tokens x group)

// Tokens per task for `group` query heads per KV head: kAttentionQueryHeads / group, in
// 1..kAttentionMaxQueryTile (more query heads per task reuse each converted K/V tile more, but
// need more scratch and leave fewer tasks to share out). Measured on a 512-token prefill with an
// f16 cache (docs/benchmarks.md): 64 / 128 widen a quarter as many tiles as the former 16 / 32
// and run 1.06-1.2x faster; 128 / 256 is no faster again. Results do not depend on these: a
// query's arithmetic is the same in any task.
int32_t attention_query_tile(int32_t group);

// A sequence's block table as the kernel sees it (e.g. BlockManager::block_table(seq).data()).
struct AttentionSeq {
    const int32_t* block_table = nullptr;
    int32_t n_blocks = 0;  // entries in block_table; positions < n_blocks * block_size are valid
};

struct PagedAttentionBatch {
    const float* q = nullptr;           // [n_tokens][n_heads][head_dim]
    int64_t n_tokens = 0;
    int32_t n_heads = 0;                // multiple of the pool's n_kv_heads
    const int32_t* token_seq = nullptr; // [n_tokens] index into seqs
    const int32_t* token_pos = nullptr; // [n_tokens] position p: attends to keys 0..p
    const AttentionSeq* seqs = nullptr; // [n_seqs]
    int32_t n_seqs = 0;
    float scale = 0.0f;                 // usually 1 / sqrt(head_dim)
    int32_t sliding_window = 0;         // > 0: token at p attends to keys p - window + 1 .. p only
    // [n_tokens] or null: under a window, the first key each token reads, non-decreasing within a
    // sequence's tokens (an image's rows reach back to the image's start: backend/attention_span.h);
    // null: token_pos - window + 1 (at least 0).
    const int32_t* first_key = nullptr;
    // [n_heads] or null: ALiBi (jina-bert-v2): each score, after the soft cap, gets
    // -alibi_slopes[h] * |query_pos[t] - key| (backend/alibi.h), query_pos [n_tokens] the tokens'
    // own positions (token_pos may be a non-causal sequence's last). Such a call walks tiles only.
    const float* alibi_slopes = nullptr;
    const int32_t* query_pos = nullptr;
    float softcap = 0.0f;               // > 0: scores become softcap * tanh(score / softcap)
    // [n_heads] or null: per query head, one more logit in its softmax denominator (an attention
    // sink, gpt-oss), folded in when the head's output is normalised: acc / (sum + e^(sink - max)).
    const float* sinks = nullptr;
    // The calling backend's own settings (kernel_plan.h PlanSettings); absent: the process's
    // (attention_method(), decode_kv_prefetch()).
    std::optional<AttentionMethod> method;
    std::optional<bool> decode_kv_prefetch;
};

// The method (attention_method.h). amx_bf16 walks the same (query run, KV head) tasks, 32 keys at a
// time on AMX bf16 tiles (amx_attention.h): scores from Q and K rounded to bf16, the online softmax
// in f32, P.V from P and V rounded to bf16. It keeps the batch invariance above (each query row's
// arithmetic depends only on its own position), but its bits are not the simd walk's: its error
// against exact attention is about bf16's (2^-8 relative per operand) where simd's is f32's. It
// takes a call where amx_attention_applies(): the method is amx_bf16, AMX bf16 runs here (AMX-BF16
// with the OS tile permission, PAGODA_AMX not 0, the avx512 path; or the AMX emulation hook of
// matmul.h, for tests), the cache holds f16 or bf16 rows (an f32 cache, the default of F32 models,
// asks for f32 accuracy, as F32 weights never take the bf16 matmul methods; q8 rows have their own
// walk) and the model has no sliding window and no soft cap. Otherwise the call takes the simd walk;
// (a call with attention sinks takes the simd walk too); every one of those conditions is fixed for a process and model, so a model's tokens all take one
// method.
// attention_method(): what set_attention_method() installed; while nothing is (or after
// set_attention_method(std::nullopt)), PAGODA_ATTENTION=simd|amx_bf16 (any other value throws), else
// simd. A kernel plan installs its choice only where PAGODA_ATTENTION is unset (kernel_plan.h), so
// the environment wins over a profile; tests that exercise one method install it and so hold it
// whatever the environment says.
AttentionMethod attention_method();
void set_attention_method(std::optional<AttentionMethod> m);
std::optional<AttentionMethod> installed_attention_method();  // what set_attention_method holds (for guards)
bool attention_method_in_environment();                     // PAGODA_ATTENTION is set (non-empty)
bool amx_attention_runs_here();  // AMX bf16 tiles (or the emulation hook) and the avx512 path
bool amx_attention_applies(kv::KvDtype dtype, int32_t sliding_window, float softcap);
// The same for `method` in place of attention_method().
bool amx_attention_applies(AttentionMethod method, kv::KvDtype dtype, int32_t sliding_window, float softcap);
uint64_t amx_attention_dispatch_count();  // paged_attention calls that took amx_bf16 since start (tests)

// Whether decode attention (the simd walk's decode tasks, amx_bf16's decode form) requests the K and
// V rows a tile ahead into L2 before each tile's work. It never changes a result, only the speed,
// and which way is faster depends on the machine, the model and the method (measured on a Xeon with
// AMX at 2-4 K keys: `small` 1.13x faster with under simd, 1.38x under amx_bf16; tinyllama level
// under simd, 1.12x under amx_bf16; a cold micro-benchmark of one call slower), so `pagoda tune`
// times whole decode steps both ways and a profile carries the choice.
// decode_kv_prefetch(): what set_decode_kv_prefetch() installed; while nothing is,
// PAGODA_DECODE_PREFETCH=0|1 (any other value throws), else off. As with the method, a kernel plan
// installs its choice only where the variable is unset.
bool decode_kv_prefetch();
void set_decode_kv_prefetch(std::optional<bool> on);
bool decode_kv_prefetch_in_environment();  // PAGODA_DECODE_PREFETCH is set (non-empty)

// out: [n_tokens][n_heads][head_dim]. Throws pagoda::Error on inconsistent arguments (head count
// not a multiple of the KV heads, a sequence index or position outside its block table, a block
// id outside the pool, a bad layer).
void paged_attention(const PagedAttentionBatch& batch, const cpu::KvPool& pool, int32_t layer, float* out,
                     ThreadPool& threads);

// paged_attention's argument checks alone (the ALiBi path shares them; alibi_attention.h).
void validate_paged_attention(const PagedAttentionBatch& batch, const cpu::KvPool& pool, int32_t layer, const float* out);

}  // namespace pagoda::backend::cpu
