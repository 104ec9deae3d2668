// `pagoda gen-model`: writes a random-weight GGUF (any supported architecture) for tests and benchmarks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "apps/cli.h"
#include "apps/command.h"
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "model/random_model.h"
#include "tokenizer/hf_tokenizer.h"
#include "vision/random_mmproj.h"

namespace pagoda::app {
namespace {

// A random LoRA adapter for the written model, in llama.cpp's GGUF form and/or as a PEFT folder
// (the same numbers in both: lora/random_adapter.h).
struct GenAdapterOptions {
    std::string gguf, peft;
    int64_t rank = 16;
    double alpha = 32;
    bool rslora = false;
    uint64_t seed = 7;
    std::string type = "f32";  // the numbers' type in both forms: f32, f16 or bf16
    bool wanted() const { return !gguf.empty() || !peft.empty(); }
};

void write_gen_adapter(const GenAdapterOptions& a, const std::string& model_path, const std::string& format) {
    if (format != "gguf") fail("--lora-out / --peft-out need --format gguf (the adapter is read against the GGUF)");
    auto base = gguf::File::open(model_path);
    const gguf::GgmlType type = a.type == "f16" ? gguf::GgmlType::F16 : a.type == "bf16" ? gguf::GgmlType::BF16 : gguf::GgmlType::F32;
    const int64_t n = lora::write_random_adapter(
        *base, {.rank = a.rank, .alpha = a.alpha, .rslora = a.rslora, .seed = a.seed, .type = type}, a.gguf, a.peft);
    std::fprintf(stderr, "pagoda gen-model: wrote a rank-%lld LoRA adapter of %lld weights%s%s%s%s\n", (long long)a.rank,
                 (long long)n, a.gguf.empty() ? "" : " to ", a.gguf.c_str(), a.peft.empty() ? "" : " and as PEFT in ",
                 a.peft.c_str());
}

struct GenModelOptions {
    std::string preset = "tiny", output, vocab, type = "f32", arch, rope_scaling;
    int64_t layers = 0, dim = 0, heads = 0, kv_heads = 0, ffn = 0, vocab_size = 0, head_dim = 0, ctx = 0;
    int64_t experts = 0, experts_used = 0, expert_ffn = 0, shared_expert_ffn = 0;
    int64_t sliding_window = 0, swa_period = 0;
    float attn_temperature_scale = -1;  // -1: not given
    int64_t attn_temperature_length = 0;
    bool tied = false, fim_tokens = false;
    uint64_t seed = 1;
    float embed_scale = 1.0f;
    std::string format = "gguf";
    int shards = 1;
    std::string rank_head;
    int64_t rank_classes = 0;
    std::string pooling, encoder_vocab, hf_class;
    GenAdapterOptions adapter;  // --lora-out / --peft-out
    std::string mmproj;            // --mmproj: also a random vision projector for the model
    int64_t mmproj_image_size = 0;  // 0: the writer's default (64)
    // deepseek2 (-1: the writer's default)
    int64_t q_lora_rank = -1, kv_lora_rank = 0, mla_rope_dims = 0, v_head_dim = 0, leading_dense = -1,
            shared_experts = -1, expert_groups = 0, expert_groups_used = 0;
    std::string expert_gating;
    float expert_scale = 0;
    bool expert_norm = false, yarn = false, mla_split = false;
    // glm4moe
    bool qk_norm = false, fused_qkvz = false;
    int64_t nextn_layers = 0;
    // gemma4
    int64_t shared_kv_layers = 0, full_head_dim = 0, full_kv_heads = 0, per_layer_embd = 0;
    bool v_equals_k = false;
};

// The deepseek2 options into the spec (glm4moe shares its MoE layout ones); refused for another architecture.
void apply_deepseek2_options(const GenModelOptions& o, model::RandomModelSpec& spec) {
    const bool mla = o.q_lora_rank >= 0 || o.kv_lora_rank || o.mla_rope_dims || o.v_head_dim || o.expert_groups ||
                     !o.expert_gating.empty() || o.yarn || o.mla_split;
    const bool layout = o.leading_dense >= 0 || o.shared_experts >= 0 || o.expert_scale > 0 || o.expert_norm;
    if (spec.arch == "glm4moe") {
        if (mla)
            fail("--q-lora-rank, --kv-lora-rank, --mla-rope-dims, --v-head-dim, --expert-groups, --expert-gating, --yarn "
                 "and --mla-split are for --arch deepseek2 (glm4moe's router is sigmoid with a correction bias)");
        if (o.leading_dense >= 0) spec.leading_dense = o.leading_dense;
        if (o.shared_experts >= 0) spec.n_shared_experts = o.shared_experts;
        if (o.expert_scale > 0) spec.expert_weights_scale = o.expert_scale;
        spec.expert_weights_norm = o.expert_norm;
    }
    if (o.nextn_layers && spec.arch != "glm4moe" && spec.arch != "qwen35" && spec.arch != "qwen35moe" &&
        spec.arch != "qwen3next")
        fail("--nextn-layers is for --arch glm4moe, qwen35, qwen35moe or qwen3next");
    if (o.fused_qkvz && spec.arch != "qwen3next") fail("--fused-qkvz is for --arch qwen3next");
    spec.fused_qkvz = o.fused_qkvz;
    if (o.qk_norm && spec.arch != "glm4moe" && spec.arch != "jina-bert-v2")
        fail("--qk-norm is for --arch glm4moe or jina-bert-v2");
    spec.qk_norm = o.qk_norm;
    spec.nextn_layers = o.nextn_layers;
    if ((o.shared_kv_layers || o.v_equals_k || o.full_head_dim || o.full_kv_heads || o.per_layer_embd) && spec.arch != "gemma4")
        fail("--shared-kv-layers, --v-equals-k, --full-head-dim, --full-kv-heads and --per-layer-embd are for --arch gemma4");
    spec.per_layer_embd = o.per_layer_embd;
    spec.full_head_dim = o.full_head_dim;
    spec.full_kv_heads = o.full_kv_heads;
    spec.shared_kv_layers = o.shared_kv_layers;
    spec.v_equals_k = o.v_equals_k;
    if (!(mla || layout) || spec.arch == "glm4moe") return;
    if (spec.arch != "deepseek2")
        fail("--q-lora-rank, --kv-lora-rank, --mla-rope-dims, --v-head-dim, --leading-dense, --shared-experts, "
             "--expert-gating, --expert-groups, --expert-scale, --expert-norm, --yarn and --mla-split are for --arch deepseek2");
    if (o.q_lora_rank >= 0) spec.q_lora_rank = o.q_lora_rank;
    spec.kv_lora_rank = o.kv_lora_rank;
    spec.mla_rope_dims = o.mla_rope_dims;
    spec.v_head_dim = o.v_head_dim;
    if (o.leading_dense >= 0) spec.leading_dense = o.leading_dense;
    if (o.shared_experts >= 0) spec.n_shared_experts = o.shared_experts;
    if (o.expert_groups && !o.expert_groups_used) fail("--expert-groups needs --expert-groups-used");
    spec.expert_groups = o.expert_groups;
    spec.expert_groups_used = o.expert_groups_used;
    if (!o.expert_gating.empty()) spec.expert_gating = o.expert_gating == "sigmoid" ? 2 : 1;
    if (o.expert_scale > 0) spec.expert_weights_scale = o.expert_scale;
    spec.expert_weights_norm = o.expert_norm;
    spec.yarn = o.yarn;
    spec.mla_split = o.mla_split;
}

// --vocab: a GGUF, or a Hugging Face folder whose tokenizer.json becomes the tokenizer.ggml.* keys
// (as a folder is read for serving: model/model_file.cpp), so a random model can carry a real
// vocabulary that only ships as tokenizer.json (gpt-oss's o200k_harmony).
std::unique_ptr<gguf::File> open_vocab(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) return gguf::File::open(path);
    const tokenizer::HfTokenizer tok = tokenizer::read_hf_tokenizer(path);
    return gguf::File::assemble(path, tokenizer::vocab_spec_gguf_keys(tok.spec, tok.chat_template), {}, nullptr, false);
}

int run_gen_model(const GenModelOptions& o) {
    model::RandomModelSpec spec = model::random_model_preset(o.preset);
    if (!o.arch.empty()) spec.arch = o.arch;
    if (o.layers) spec.n_layers = o.layers;
    if (o.dim) spec.dim = o.dim;
    if (o.heads) spec.n_heads = o.heads;
    if (o.kv_heads) spec.n_kv_heads = o.kv_heads;
    if (o.ffn) spec.ffn_dim = o.ffn;
    if (o.vocab_size) spec.vocab_size = o.vocab_size;
    if (o.head_dim) spec.head_dim = o.head_dim;
    if (o.ctx) spec.context_length = o.ctx;
    if (o.fim_tokens && !o.vocab.empty()) fail("--fim-tokens is for the synthetic vocabulary (not with --vocab)");
    spec.fim_tokens = o.fim_tokens;
    spec.tied_output = spec.tied_output || o.tied;
    spec.n_experts = o.experts;
    if (o.experts_used) spec.n_experts_used = o.experts_used;
    spec.expert_ffn_dim = o.expert_ffn;
    spec.shared_expert_ffn_dim = o.shared_expert_ffn;
    if (!o.experts && (o.experts_used || o.expert_ffn || o.shared_expert_ffn))
        fail("--experts-used, --expert-ffn-dim and --shared-expert-ffn-dim need --experts");
    if (o.shared_expert_ffn && spec.arch != "qwen2moe" && spec.arch != "qwen35moe" && spec.arch != "qwen3next")
        fail("--shared-expert-ffn-dim is for --arch qwen2moe, qwen35moe or qwen3next");
    apply_deepseek2_options(o, spec);
    spec.sliding_window = o.sliding_window;
    spec.swa_period = o.swa_period;
    spec.rope_scaling = o.rope_scaling;
    if (o.attn_temperature_scale >= 0) spec.attn_temperature_scale = o.attn_temperature_scale;
    spec.attn_temperature_length = o.attn_temperature_length;
    spec.seed = o.seed;
    spec.embed_scale = o.embed_scale;
    spec.rank_head = o.rank_head;
    spec.rank_classes = o.rank_classes;
    if (!o.pooling.empty() && spec.arch != "bert" && spec.arch != "nomic-bert" && spec.arch != "jina-bert-v2")
        fail("--pooling is for --arch bert, nomic-bert or jina-bert-v2 (encoders)");
    if (!o.pooling.empty()) spec.pooling = o.pooling;
    if (!o.mmproj.empty() && spec.arch != "gemma3" && spec.arch != "qwen3vl" && spec.arch != "gemma4")
        fail("--mmproj writes Gemma 3's, Gemma 4's or Qwen3-VL's vision projector: it needs --arch gemma3, gemma4 or "
             "qwen3vl (got '{}')",
             spec.arch);
    if (o.mmproj_image_size && (spec.arch == "qwen3vl" || spec.arch == "gemma4"))
        fail("--mmproj-image-size is for --arch gemma3 (Qwen3-VL and Gemma 4 take images of any size)");
    if (!o.mmproj.empty() && o.format != "gguf") fail("--mmproj is for --format gguf (llama.cpp's mmproj layout)");
    if (o.mmproj_image_size && o.mmproj.empty()) fail("--mmproj-image-size needs --mmproj");
    if (!o.encoder_vocab.empty() && spec.arch != "bert") fail("--encoder-vocab is for --arch bert");
    if (!o.encoder_vocab.empty()) spec.encoder_vocab = o.encoder_vocab;
    if (!o.hf_class.empty() && o.format != "hf") fail("--hf-class is for --format hf");
    spec.hf_class = o.hf_class;
    if (o.type == "f32") spec.type = gguf::GgmlType::F32;
    else if (o.type == "f16") spec.type = gguf::GgmlType::F16;
    else if (o.type == "bf16") spec.type = gguf::GgmlType::BF16;
    else if (o.type == "mxfp4" && spec.arch == "gpt-oss") {
        spec.type = gguf::GgmlType::F16;
        spec.mxfp4_experts = true;
    } else fail("--type must be f32, f16, bf16 or (gpt-oss) mxfp4 (got '{}'); quantise afterwards with `pagoda quantize`", o.type);

    if (o.format == "gguf" && o.shards != 1) fail("--shards is for --format hf");
    // The synthetic vocabulary then carries the image control tokens a prompt with images needs.
    spec.image_tokens = !o.mmproj.empty();
    std::unique_ptr<gguf::File> vocab;
    if (!o.vocab.empty()) vocab = open_vocab(o.vocab);
    auto start = std::chrono::steady_clock::now();
    int64_t params = o.format == "hf" ? model::write_random_model_hf(spec, o.output, o.shards, vocab.get())
                                      : model::write_random_model(spec, vocab.get(), o.output);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string experts =
        spec.n_experts > 0 ? fmt::format(", {} experts, top {}", spec.n_experts, spec.n_experts_used) : "";
    std::fprintf(stderr, "pagoda gen-model: wrote %s (%s%s, %lld layers, dim %lld, %.1f M parameters, %s) in %.1f s\n",
                 o.output.c_str(), spec.arch.c_str(), experts.c_str(), (long long)spec.n_layers, (long long)spec.dim,
                 double(params) / 1e6, o.type.c_str(), seconds);
    if (o.adapter.wanted()) write_gen_adapter(o.adapter, o.output, o.format);
    if (!o.mmproj.empty()) {
        vision::RandomMmprojSpec v;
        v.text_dim = spec.dim;  // the projection lands in the text model's embedding space
        v.seed = spec.seed + 1;
        v.type = spec.type;
        if (o.mmproj_image_size) v.image_size = o.mmproj_image_size;
        if (spec.arch == "qwen3vl") {  // its deep-stack mergers feed the text model's deep-stack layers
            v.projector = "qwen3vl_merger";
            v.n_layers = std::max<int64_t>(2, model::qwen3vl_deepstack_layers(spec.n_layers));
            v.n_deepstack = model::qwen3vl_deepstack_layers(spec.n_layers);
            const int64_t vision_params = vision::write_random_mmproj(v, o.mmproj);
            std::fprintf(stderr, "pagoda gen-model: wrote %s (qwen3vl_merger vision projector, %lld..%lld pixel images, "
                         "%lld deep-stack mergers, %.2f M parameters)\n", o.mmproj.c_str(), (long long)v.min_pixels,
                         (long long)v.max_pixels, (long long)v.n_deepstack, double(vision_params) / 1e6);
            return 0;
        }
        if (spec.arch == "gemma4") {  // Gemma 4's pooling kernel; 16 soft tokens an image at most
            v.projector = "gemma4v";
            v.pool = 3;
            const int64_t vision_params = vision::write_random_mmproj(v, o.mmproj);
            std::fprintf(stderr, "pagoda gen-model: wrote %s (gemma4v vision projector, images of up to %lld tokens, "
                         "%.2f M parameters)\n", o.mmproj.c_str(), (long long)v.max_soft_tokens, double(vision_params) / 1e6);
            return 0;
        }
        const int64_t vision_params = vision::write_random_mmproj(v, o.mmproj);
        std::fprintf(stderr, "pagoda gen-model: wrote %s (%s vision projector, %lldx%lld images, %lld image tokens, %.2f M parameters)\n",
                     o.mmproj.c_str(), v.projector.c_str(), (long long)v.image_size, (long long)v.image_size,
                     (long long)((v.image_size / v.patch_size / v.pool) * (v.image_size / v.patch_size / v.pool)),
                     double(vision_params) / 1e6);
    }
    return 0;
}

CommandRegistration reg("gen-model", "Write a random-weight model (GGUF or Hugging Face folder) of a supported architecture (tests, benchmarks)",
                        [](CLI::App& sub) {
    auto o = std::make_shared<GenModelOptions>();
    sub.add_option("-o,--output", o->output, "Output GGUF path (--format hf: the folder to write)")->required();
    sub.add_option("--format", o->format,
                   "gguf (one file), or hf: a Hugging Face folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json); "
                   "the same --seed gives the same weights in both")
        ->check(CLI::IsMember({"gguf", "hf"}));
    sub.add_option("--shards", o->shards, "--format hf: split the weights over N safetensors files with an index")
        ->check(in_range(1, 1000));
    sub.add_option("--preset", o->preset, "Shape preset: tiny, small (~134M), tinyllama (~1.1B)")
        ->check(CLI::IsMember({"tiny", "small", "tinyllama"}));
    sub.add_option("--vocab", o->vocab,
                   "Copy the tokenizer from this GGUF, or from a folder's tokenizer.json (+ tokenizer_config.json: its "
                   "chat template) (default: synthetic vocabulary)");
    sub.add_option("--type", o->type, "Weight type: f32, f16, bf16; gpt-oss also mxfp4 (MXFP4 experts, F16 other matrices)");
    sub.add_option("--arch", o->arch,
                   "llama, qwen2, qwen3, qwen2moe, qwen3moe (these two need --experts), gemma2, gemma3, gemma4 (with --experts: the 26B-A4B form, experts beside the dense FFN), phi3, "
                   "gpt-oss (needs --experts; YaRN, sinks, alternating sliding layers), deepseek2 (needs --experts; MLA, "
                   "leading dense layers, shared experts), glm4moe (needs --experts; GLM-4.5: partial NEOX RoPE, QKV "
                   "biases, leading dense layers, sigmoid router with a correction bias, shared experts), glm4 "
                   "(GLM-4-0414: sandwich norms, fused gate|up), smollm3 (llama with every 4th layer NoPE), mistral3 "
                   "(Ministral 3: llama with YaRN and attention temperature keys), qwen35 (Qwen3.5: gated DeltaNet "
                   "layers with every 4th one gated full attention; at least 4 layers), qwen35moe (its MoE form, needs "
                   "--experts; a sigmoid-gated shared expert), qwen3next (Qwen3-Next, needs --experts: qwen35moe's layers "
                   "with fused DeltaNet projections, value heads grouped per key head), minimax-m2 (needs --experts; MiniMax-M2: Q/K norms over the "
                   "whole projected rows, partial NEOX RoPE, every layer sigmoid-routed experts with a selection bias), or the "
                   "encoders bert (an embedding model: LayerNorms with bias, learned positions, a WordPiece vocabulary) "
                   "and nomic-bert (RoPE, SwiGLU, no biases) and jina-bert-v2 (ALiBi, GEGLU; --qk-norm: the -code form)")
        ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3vl", "qwen2moe", "qwen3moe", "gemma2", "gemma3", "gemma4", "phi3", "bert",
                               "nomic-bert", "jina-bert-v2", "gpt-oss", "deepseek2", "glm4moe", "glm4", "smollm3",
                               "mistral3", "qwen35", "qwen35moe", "qwen3next", "minimax-m2"}));
    sub.add_option("--pooling", o->pooling, "bert, nomic-bert, jina-bert-v2: the pooling_type written, mean (default) or cls")
        ->check(CLI::IsMember({"mean", "cls"}));
    sub.add_option("--encoder-vocab", o->encoder_vocab,
                   "bert: the synthetic vocabulary, wordpiece (BERT's, default) or unigram (XLM-R's SentencePiece layout)")
        ->check(CLI::IsMember({"wordpiece", "unigram"}));
    sub.add_option("--hf-class", o->hf_class,
                   "bert, --format hf: the class written (default BertModel, XLMRobertaModel for a unigram vocabulary, "
                   "*ForSequenceClassification with --rank-head)")
        ->check(CLI::IsMember({"BertModel", "BertForSequenceClassification", "RobertaModel", "RobertaForSequenceClassification",
                               "XLMRobertaModel", "XLMRobertaForSequenceClassification"}));
    sub.add_option("--experts", o->experts, "Mixture of experts: experts per layer (llama: Mixtral style)")
        ->check(in_range(1, 4096));
    sub.add_option("--experts-used", o->experts_used, "Experts each token uses (top-k; default 2)")->check(in_range(1, 4096));
    sub.add_option("--expert-ffn-dim", o->expert_ffn, "FFN width of each expert (default: the FFN width)")
        ->check(in_range(1, 1 << 20));
    sub.add_option("--shared-expert-ffn-dim", o->shared_expert_ffn,
                   "qwen2moe: the shared expert's FFN width (default: twice the expert width)")
        ->check(in_range(1, 1 << 20));
    sub.add_option("--q-lora-rank", o->q_lora_rank, "deepseek2: Q's bottleneck rank (0: a plain attn_q, V2-Lite; default dim/2)")
        ->check(in_range(0, 1 << 16));
    sub.add_option("--kv-lora-rank", o->kv_lora_rank, "deepseek2: the KV latent's rank (default dim/2)")->check(in_range(1, 1 << 16));
    sub.add_option("--mla-rope-dims", o->mla_rope_dims, "deepseek2: the RoPE part of each key head (even; default a quarter)")
        ->check(in_range(2, 1024));
    sub.add_option("--v-head-dim", o->v_head_dim, "deepseek2: the value head size (default: the key's no-RoPE size)")
        ->check(in_range(1, 1024));
    sub.add_option("--leading-dense", o->leading_dense, "deepseek2, glm4moe: dense FFN layers before the MoE ones (default 1)")
        ->check(in_range(0, 1024));
    sub.add_option("--shared-experts", o->shared_experts, "deepseek2, glm4moe: shared experts of the expert width (default 1)")
        ->check(in_range(0, 64));
    sub.add_option("--expert-gating", o->expert_gating, "deepseek2: router scores, softmax (default, V2) or sigmoid (V3, with "
                   "a correction bias)")->check(CLI::IsMember({"softmax", "sigmoid"}));
    sub.add_option("--expert-groups", o->expert_groups, "deepseek2: expert groups (group-limited top-k)")->check(in_range(1, 1024));
    sub.add_option("--expert-groups-used", o->expert_groups_used, "deepseek2: groups kept per token")->check(in_range(1, 1024));
    sub.add_option("--expert-scale", o->expert_scale, "deepseek2, glm4moe: the routed scaling factor (default 1)")
        ->check(CLI::Range(1e-3f, 1e3f));
    sub.add_flag("--expert-norm", o->expert_norm, "deepseek2, glm4moe: renormalise the top-k weights (V3, GLM-4.5)");
    sub.add_flag("--yarn", o->yarn, "deepseek2: V3's YaRN (factor 40, yarn_log_multiplier 0.1)");
    sub.add_flag("--mla-split", o->mla_split, "deepseek2: newer converters' attn_k_b / attn_v_b and key_length_mla keys");
    sub.add_flag("--fused-qkvz", o->fused_qkvz,
                 "qwen3next: write older converters' fused ssm_in (q, k, v, z interleaved per key head) in place of "
                 "attn_qkv + attn_gate");
    sub.add_flag("--qk-norm", o->qk_norm, "glm4moe: GLM-4.5's per-head Q/K RMSNorms (Air has none); jina-bert-v2: the "
                 "-code form (Q/K LayerNorms, attn_norm_2, ffn_gate and ffn_up apart)");
    sub.add_option("--nextn-layers", o->nextn_layers, "glm4moe: trailing NextN (multi-token prediction) blocks, stored "
                   "and not run")->check(in_range(0, 4));
    sub.add_option("--shared-kv-layers", o->shared_kv_layers, "gemma4: the last N layers reuse the KV of the last earlier "
                   "layer of their kind (sliding or full)")->check(in_range(0, 1 << 20));
    sub.add_option("--full-head-dim", o->full_head_dim, "gemma4: the full layers' head size (default --head-dim)")
        ->check(in_range(2, 4096));
    sub.add_option("--full-kv-heads", o->full_kv_heads, "gemma4: the full layers' KV heads (default --kv-heads)")
        ->check(in_range(1, 4096));
    sub.add_option("--per-layer-embd", o->per_layer_embd, "gemma4: the E2B/E4B form, per-layer embeddings of N values a "
                   "layer, and the KV-sharing layers' FFN twice as wide")->check(in_range(1, 4096));
    sub.add_flag("--v-equals-k", o->v_equals_k, "gemma4: full layers have no attn_v (V is the K projection, weightless-normed)");
    sub.add_option("--sliding-window", o->sliding_window,
                   "Sliding-window size (gemma2 default 4096, gemma3 512; phi3: every layer slides)")
        ->check(in_range(1, 1 << 24));
    sub.add_option("--swa-period", o->swa_period,
                   "Write {arch}.attention.sliding_window_pattern: layer i slides unless i % N == N - 1")
        ->check(in_range(1, 1024));
    sub.add_option("--rope-scaling", o->rope_scaling, "llama: llama3 (writes rope_freqs.weight from Llama 3.1's formula)")
        ->check(CLI::IsMember({"llama3"}));
    sub.add_option("--attn-temperature-scale", o->attn_temperature_scale,
                   "deepseek2, mistral3: Llama 4's attention temperature, {arch}.attention.temperature_scale (beta: each "
                   "query times 1 + beta log(1 + floor(pos / length)); 0: none; mistral3's default 0.1)")
        ->check(CLI::Range(0.0f, 100.0f));
    sub.add_option("--attn-temperature-length", o->attn_temperature_length,
                   "deepseek2: the temperature's floor length, {arch}.attention.temperature_length (default a quarter "
                   "of --ctx; mistral3's is its rope.scaling.original_context_length)")
        ->check(in_range(1, 1 << 24));
    sub.add_option("--layers", o->layers, "Override the layer count")->check(in_range(1, 1024));
    sub.add_option("--dim", o->dim, "Override the embedding width")->check(in_range(2, 65536));
    sub.add_option("--heads", o->heads, "Override the attention head count")->check(in_range(1, 1024));
    sub.add_option("--kv-heads", o->kv_heads, "Override the KV head count")->check(in_range(1, 1024));
    sub.add_option("--head-dim", o->head_dim, "Override the head size")->check(in_range(2, 1024));
    sub.add_option("--ffn", o->ffn, "Override the FFN width")->check(in_range(1, 1 << 20));
    sub.add_option("--vocab-size", o->vocab_size, "Synthetic vocabulary size")->check(in_range(260, 1 << 20));
    sub.add_option("--ctx", o->ctx, "Context length written to the metadata")->check(in_range(1, 1 << 24));
    sub.add_flag("--fim-tokens", o->fim_tokens,
                 "Synthetic vocabulary: make its last six ids Qwen2.5-Coder's fill-in-the-middle tokens "
                 "(<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>)");
    sub.add_flag("--tied", o->tied, "Tie the output head to the embedding");
    sub.add_option("--seed", o->seed, "Random seed");
    sub.add_option("--embed-scale", o->embed_scale,
                   "Multiply the token embedding's scale (above 1 the current token dominates, so greedy "
                   "output soon repeats its context: a copy-heavy benchmark stand-in)")
        ->check(CLI::Range(1e-3f, 1e3f));
    sub.add_option("--rank-head", o->rank_head,
                   "Make a classification reranker (pooling_type rank, served by /v1/rerank): output adds random "
                   "cls.output.weight/bias (hidden -> classes); dense also cls.weight/bias before it (hidden -> hidden, tanh)")
        ->check(CLI::IsMember({"output", "dense"}));
    sub.add_option("--rank-classes", o->rank_classes,
                   "--rank-head: the head's classes (default 2 for qwen3, labelled yes/no and softmaxed; else 1)")
        ->check(in_range(1, 1 << 16));
    sub.add_option("--mmproj", o->mmproj,
                   "--arch gemma3, gemma4 or qwen3vl: also write a random vision projector (llama.cpp's mmproj GGUF; qwen3vl: a Qwen3-VL tower "
                   "with its merger and deep-stack mergers; gemma4: a gemma4v tower, images of up to 16 tokens; gemma3: a SigLIP tower and "
                   "Gemma 3's projector into the model's width; 64x64 images, 8x8 patches, 16 image tokens)");
    sub.add_option("--mmproj-image-size", o->mmproj_image_size,
                   "--mmproj: the image side in pixels (a multiple of 16: 8x8 patches pooled 2x2; default 64)")
        ->check(in_range(16, 4096));
    // LoRA adapters for the model written (lora/random_adapter.h).
    sub.add_option("--lora-out", o->adapter.gguf, "Also write a random LoRA adapter for the model, as a GGUF LoRA file");
    sub.add_option("--peft-out", o->adapter.peft, "... and/or as a PEFT folder (the same numbers as --lora-out)");
    sub.add_option("--lora-rank", o->adapter.rank, "The adapter's rank")->check(in_range(int64_t(1), int64_t(4096)));
    sub.add_option("--lora-alpha", o->adapter.alpha, "The adapter's alpha (scale alpha / rank)")->check(CLI::Range(0.0, 1e6));
    sub.add_flag("--lora-rslora", o->adapter.rslora, "rsLoRA scaling (alpha / sqrt(rank))");
    sub.add_option("--lora-seed", o->adapter.seed, "The adapter's random seed");
    sub.add_option("--lora-type", o->adapter.type, "The adapter's number type in both forms (llama.cpp's convert_lora_to_gguf writes f16)")
        ->check(CLI::IsMember({"f32", "f16", "bf16"}));
    return [o] { return run_gen_model(*o); };
});

}  // namespace
}  // namespace pagoda::app
