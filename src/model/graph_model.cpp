#include "model/graph_model.h"
#include "model/model_file.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "backend/attention_span.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "core/log.h"
#include "kv/block_manager.h"
#include "model/fusion.h"
#include "model/graph_check.h"
#include "model/model_identity.h"
#include "model/split_kv_cache.h"

namespace pagoda::model {
namespace {

// The backend `name` for a model opened with `o`: the CPU backend with the model's own kernel plan
// when it has one (its settings as set_kernel_plan would install them), else the registry's.
std::unique_ptr<backend::Backend> make_model_backend(const std::string& name, const StepModelOptions& o) {
    if (name == "cpu" && o.kernel_plan)
        return backend::make_cpu_backend({.n_threads = o.threads}, backend::cpu::plan_settings(*o.kernel_plan));
    return backend::make_backend(name, {.n_threads = o.threads});
}

}  // namespace

GraphModel::GraphModel(std::shared_ptr<const gguf::File> file, const StepModelOptions& o) : file_(std::move(file)) {
    if (o.max_context < 0) fail("--ctx must not be negative, got {}", o.max_context);
    config_ = read_config(*file_);
    config_.max_context = o.max_context;
    // Before the weights are packed and their file pages dropped: it samples the tensor bytes.
    const uint64_t identity = model_identity(*file_);
    const bool device = o.backend != "cpu" && o.backend != "reference";
    // deepseek2's absorbed MLA: its latent cache (V rows = K rows, heads of rope + kv_lora_rank) runs on
    // the cpu and reference backends; a device backend running layers gets the naive form by default.
    if (!o.mla.empty() && o.mla != "absorbed" && o.mla != "naive")
        fail("--mla must be absorbed or naive, got '{}'", o.mla);
    config_.mla_absorbed = config_.arch == "deepseek2" &&
                           (o.mla.empty() ? !device || o.n_gpu_layers == 0 : o.mla == "absorbed");
    const int32_t n_layers = int32_t(config_.n_layers);
    if (o.n_gpu_layers < -1) fail("--n-gpu-layers must be -1 (all) or more, got {}", o.n_gpu_layers);
    if (device && o.n_gpu_layers >= 1 && o.n_gpu_layers <= n_layers) {  // a partial offload
        split_ = {n_layers, o.n_gpu_layers};
        device_ = backend::make_backend(o.backend, {.n_threads = o.threads});
        backend_ = make_model_backend("cpu", o);
        router_ = std::make_unique<LayerRouter>(*device_, *backend_, split_);
        built_ = find_arch_builder(config_.arch)(*file_, config_, *router_);
    } else {  // -ngl 0 runs everything on the CPU, as llama.cpp
        backend_ = make_model_backend(device && o.n_gpu_layers == 0 ? "cpu" : o.backend, o);
        built_ = find_arch_builder(config_.arch)(*file_, config_, *backend_);
    }
    create_kv_cache(o);
    const bool recurrent = std::any_of(built_.graph.tensors.begin(), built_.graph.tensors.end(),
                                       [](const TensorSpec& t) { return t.rows == Rows::state; });
    if (recurrent) {
        if (o.state_slots < 0 || o.state_slots > 4096) fail("state slots {} is out of range (0..4096)", o.state_slots);
        built_.graph.state_slots = o.state_slots > 0 ? o.state_slots : 16;
        if (device_)
            fail("{}: a partial offload (--n-gpu-layers {}) of a model with recurrent layers ({}) is not supported: "
                 "its per-sequence state would have to cross between the backends", file_->name(), o.n_gpu_layers, config_.arch);
        if (o.lora)
            fail("{}: LoRA adapters on a model with recurrent layers ({}) are not supported", file_->name(), config_.arch);
        slot_tokens_.assign(size_t(built_.graph.state_slots), -1);
        int64_t per_slot = 0;
        for (const TensorSpec& t : built_.graph.tensors) per_slot += t.rows == Rows::state ? t.cols : 0;
        log_info("{}: recurrent state: {} slots of {:.1f} MiB (running sequences, then prefix-cache snapshots)",
                 file_->name(), built_.graph.state_slots, double(per_slot) * double(backend_->activation_size()) / (1 << 20));
    }
    const bool fusion = o.fusion && fusion_enabled_by_env();
    executor_ = staged(built_.graph, fusion);
    executor_->reserve(std::max<int64_t>(1, o.max_step_tokens));
    if (o.lora) {
        Graph with_lora = with_lora_nodes(built_.graph);
        if (with_lora.lora_targets.empty()) fail("{}: this model has no layer projections an adapter could update", file_->name());
        // Only the CPU backend streams the compact form a rounded storage fills; another would read the
        // f32 numbers and silently not do what --lora-dtype asked.
        if (o.lora_storage != lora::LoraStorage::exact && (device_ || backend_->name() != "cpu"))
            fail("--lora-dtype bf16/f16 is for the cpu backend's steps; the {} backend reads adapters as f32",
                 o.backend);
        lora_step_ = std::make_unique<LoraStep>(with_lora.lora_targets, o.lora_storage);
        lora_executor_ = staged(with_lora, fusion);
        lora_executor_->reserve(std::max<int64_t>(1, o.max_step_tokens));
        lora_executor_->set_lora_segments(&lora_step_->segments());
    }
    const kv::KvLayout& layout = cache_->layout();

    info_.vocab_size = config_.vocab_size;
    info_.n_kv_blocks = cache_->n_blocks();
    info_.block_size = layout.block_size;
    for (const Node& n : built_.graph.nodes) {  // the widest window when every layer has one, else 0
        if (n.kind != OpKind::attention) continue;
        if (n.attention.sliding_window <= 0) {
            window_ = 0;
            break;
        }
        window_ = std::max(window_, n.attention.sliding_window);
    }
    info_.sliding_window = window_;
    info_.image_input = executor_->takes_input_embeddings();
    info_.mrope = std::any_of(built_.graph.nodes.begin(), built_.graph.nodes.end(),
                              [](const Node& n) { return n.rope && !n.rope->spec().pair_axis.empty(); });
    info_.plain_attention = std::none_of(built_.graph.nodes.begin(), built_.graph.nodes.end(), [](const Node& n) {
        return n.kind == OpKind::attention && (n.attention.sliding_window > 0 || n.attention.softcap > 0 || n.attention.sinks ||
                                                  n.attention.alibi_max_bias > 0);
    });
    info_.max_context = o.max_context > 0 ? o.max_context : config_.context_length;
    if (built_.max_positions > 0) {  // a learned position table: nothing past its rows
        if (o.max_context > built_.max_positions)
            fail("{}: --ctx {} exceeds the model's {} {}", file_->name(), o.max_context, built_.max_positions,
                 built_.max_positions_reason);
        info_.max_context = std::min(info_.max_context, built_.max_positions);
    }
    info_.embedding_only = built_.graph.output < 0;
    info_.n_token_types = built_.n_token_types;
    info_.bidirectional = std::any_of(built_.graph.nodes.begin(), built_.graph.nodes.end(), [](const Node& n) {
        return n.kind == OpKind::attention && !n.attention.causal;
    });
    // Distinguishes these weights (the prefix tier keys its blocks by it): stable across processes.
    info_.model_key = identity;
    info_.kv_layout = layout;
    info_.kv_bytes_per_block = layout.bytes_per_block();
    info_.hidden_size = executor_->hidden_cols();
    // Names the split too: KV bytes (the prefix tier) and timings differ with it.
    info_.backend = device_ ? fmt::format("{}:{}+{}", device_->name(), split_.device_layers, backend_->name()) : backend_->name();
    info_.threads = backend_->n_threads();
    info_.config = config_;
    info_.lora = lora_step_ != nullptr;
    info_.n_state_slots = int32_t(built_.graph.state_slots);
    log_debug("{}: {} ({})", file_->name(), router_ ? router_->describe() : backend_->name(), executor_->op_counts());
    if (lora_executor_) log_debug("{}: LoRA steps: {}", file_->name(), lora_executor_->op_counts());
}

void GraphModel::create_kv_cache(const StepModelOptions& o) {
    kv::KvLayout layout;
    layout.n_layers = built_.kv_layers > 0 ? built_.kv_layers : int32_t(config_.n_layers);
    layout.n_kv_heads = built_.kv_heads > 0 ? built_.kv_heads : int32_t(config_.n_kv_heads);
    layout.head_dim = built_.kv_head_dim > 0 ? built_.kv_head_dim : int32_t(config_.head_dim);
    layout.v_is_k = built_.kv_v_is_k;
    layout.block_size = o.kv.block_size;
    layout.dtype = o.kv.dtype ? *o.kv.dtype : built_.kv_dtype;
    layout.validate();
    if (!device_) {
        cache_ = backend_->create_kv_cache(layout, kv_block_count(o.kv, layout, o.tokens_wanted, backend_->memory_bytes()));
        return;
    }
    // A split's parts share block ids, so one count: a size budgets blocks of every layer (the two
    // parts together); a fraction is of each part's own backend memory, and the tighter part decides.
    kv::KvLayout device_part = layout, host_part = layout;
    device_part.n_layers = std::min(split_.device_layers, layout.n_layers);  // fewer KV layers than layers (shared KV)
    host_part.n_layers = layout.n_layers - split_.device_layers;
    int64_t blocks = kv_block_count(o.kv, layout, o.tokens_wanted);
    if (!o.kv.memory.empty() && is_fractional_budget(o.kv.memory)) {
        blocks = kv_block_count(o.kv, device_part, o.tokens_wanted, device_->memory_bytes());
        if (host_part.n_layers > 0)
            blocks = std::min(blocks, kv_block_count(o.kv, host_part, o.tokens_wanted, backend_->memory_bytes()));
    }
    std::vector<SplitKvCache::Part> parts;
    parts.push_back({device_->create_kv_cache(device_part, blocks), 0});
    if (host_part.n_layers > 0) parts.push_back({backend_->create_kv_cache(host_part, blocks), split_.device_layers});
    cache_ = std::make_unique<SplitKvCache>(layout, std::move(parts));
}

std::unique_ptr<StagedExecutor> GraphModel::staged(const Graph& graph, bool fusion) const {
    std::vector<StagedExecutor::Stage> stages;
    if (!device_) {
        check_graph(graph, *backend_);
        stages.push_back({backend_.get(), cache_.get(), fusion ? fuse(graph, *backend_) : graph});
        return std::make_unique<StagedExecutor>(std::move(stages));
    }
    auto& split_cache = static_cast<SplitKvCache&>(*cache_);
    for (GraphSegment& seg : split_by_layer(graph, split_)) {
        backend::Backend& b = seg.side == Side::device ? *device_ : *backend_;
        router_->rebind(seg.graph, seg.side);
        check_segment(seg, b, split_);
        backend::KvCache* cache = seg.side == Side::device ? &split_cache.part(0)
                                  : split_.device_layers < split_.n_layers ? &split_cache.part(1)
                                                                           : cache_.get();  // the head reads no KV
        stages.push_back({&b, cache, fusion ? fuse(seg.graph, b) : std::move(seg.graph)});
    }
    return std::make_unique<StagedExecutor>(std::move(stages));
}

std::vector<float> GraphModel::forward(const Batch& batch) {
    const auto start = std::chrono::steady_clock::now();
    struct StepTimer {  // adds the whole step, however it ends
        OpTimes* times;
        std::chrono::steady_clock::time_point start;
        ~StepTimer() {
            if (!times) return;
            ++times->steps;
            times->step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
    } timer{op_times_, start};
    validate(batch);
    for (const auto& c : batch.block_copies) cache_->copy_block(c.src, c.dst);
    const int64_t n = batch.size();
    if (built_.graph.state_slots > 0) prepare_state(batch);
    hidden_.clear();
    if (n == 0) return {};
    logit_rows_.clear();
    hidden_rows_.clear();
    for (int64_t t = 0; t < n; ++t) {
        if (batch.want_logits[t]) logit_rows_.push_back(int32_t(t));
        if (!batch.want_hidden.empty() && batch.want_hidden[t]) hidden_rows_.push_back(int32_t(t));
    }
    if (!hidden_rows_.empty() && info_.hidden_size == 0) fail("this model's graph gives no hidden states");
    if (!logit_rows_.empty() && info_.embedding_only)
        fail("this model ({}) is an embedding model: it has no output head, so no logits", config_.arch);
    // Steps where some row has an adapter run the LoRA twin of the graph; the rest the plain one.
    StagedExecutor& executor = lora_step_ && lora_step_->prepare(batch) ? *lora_executor_ : *executor_;
    executor.reserve(n);
    attend_from_ = backend::attention_span_starts(batch.seq_index, batch.positions, batch.attend_until);
    // One stage without recurrent state: every step tensor has the executor's capacity rows, so the
    // backend may compute padding rows (StepInputs::row_capacity). Not across stages (an imported
    // tensor's padding rows are never written) nor with state tensors (one row per slot).
    const bool paddable = executor.n_stages() == 1 && built_.graph.state_slots == 0;
    executor.begin_step({.tokens = batch.tokens, .positions = batch.positions, .seq_index = batch.seq_index,
                          .slots = batch.slots, .logit_rows = logit_rows_, .block_tables = batch.block_tables,
                          .hidden_rows = hidden_rows_, .token_types = batch.token_types,
                          .attend_until = batch.attend_until, .attend_from = attend_from_, .rope_positions = batch.rope_positions, .row_capacity = paddable ? executor.capacity() : 0});
    executor.set_input_embeddings(batch.embedding_rows, batch.embeddings.data());
    std::vector<float> logits;
    executor.run({n, int64_t(logit_rows_.size()), int64_t(hidden_rows_.size())}, logits, hidden_,
                   observer_ ? &observer_ : nullptr);
    for (int64_t t = 0; t < n && !state_rows_.empty(); ++t) slot_tokens_[size_t(state_rows_[size_t(t)])] = batch.positions[size_t(t)] + 1;
    return logits;
}

void GraphModel::prepare_state(const Batch& batch) {
    for (const auto& c : batch.state_copies) {
        executor_->copy_state(c.src, c.dst);
        slot_tokens_[size_t(c.dst)] = slot_tokens_[size_t(c.src)];
    }
    state_rows_.resize(size_t(batch.size()));
    std::vector<uint8_t> started(batch.block_tables.size(), 0);
    for (int64_t t = 0; t < batch.size(); ++t) {
        const auto s = size_t(batch.seq_index[size_t(t)]);
        const int32_t slot = batch.seq_state[s];
        state_rows_[size_t(t)] = slot;
        if (started[s]) continue;
        started[s] = 1;
        if (batch.positions[size_t(t)] == 0) {  // a new (or recomputed) sequence starts from a zero state
            executor_->reset_state(slot);
            slot_tokens_[size_t(slot)] = 0;
        }
    }
    executor_->set_state_rows(state_rows_);
}

std::shared_ptr<const lora::Adapter> GraphModel::load_lora(const std::string& path, const std::string& name, float scale) {
    if (!lora_step_)
        fail("LoRA adapter {}: the model was opened without LoRA support (give --lora or --allow-runtime-lora)", path);
    auto adapter = std::make_shared<lora::Adapter>(lora::load_adapter(path, *file_, name, scale));
    for (auto& p : adapter->pairs) {
        p.slot = lora_step_->slot(p.target);
        if (p.slot < 0)
            fail("{}: the adapter targets {}, which this model's graph does not multiply as a layer projection "
                 "(adapters on embeddings, the output head or MoE experts are not supported)", path, p.target);
    }
    lora_step_->add_adapter(adapter);  // its compact form, now rather than in its first step
    return adapter;
}

std::vector<std::span<const uint8_t>> GraphModel::weight_memory() const {
    std::vector<std::span<const uint8_t>> out;
    for (const auto* w : built_.matmul_weights)
        for (auto span : w->host_memory()) out.push_back(span);
    return out;
}

std::string GraphModel::matmul_arithmetic() const {
    for (const auto* w : built_.matmul_weights) {
        if (w->parts().size() != 3) continue;  // the first Q|K|V projection speaks for the model
        const backend::Backend& b = router_ ? static_cast<const backend::Backend&>(*router_) : *backend_;
        return backend::matmul_arithmetic_name(b.matmul_arithmetic(*w, 512));
    }
    return "";
}

std::string GraphModel::describe_graph(int64_t n_tokens, int64_t n_logits, bool as_run) const {
    if (!as_run || executor_->n_stages() == 1) {
        const Graph& g = as_run ? executor_->graph() : built_.graph;
        const backend::Backend& b = as_run || !router_ ? executor_->backend() : *router_;
        return fmt::format("{} ops ({})\n{}", g.nodes.size(), g.op_counts(), format_graph(g, b, n_tokens, n_logits));
    }
    std::string out;
    for (size_t i = 0; i < executor_->n_stages(); ++i) {
        const Graph& g = executor_->graph(i);
        out += fmt::format("on {}: {} ops ({})\n{}", executor_->backend(i).name(), g.nodes.size(), g.op_counts(),
                           format_graph(g, executor_->backend(i), n_tokens, n_logits));
    }
    return out;
}

std::unique_ptr<StepModel> open_step_model(std::shared_ptr<const gguf::File> file, const StepModelOptions& options) {
    if (!file) fail("open_step_model: no file");
    return std::make_unique<GraphModel>(std::move(file), options);
}

std::unique_ptr<StepModel> open_step_model(const std::string& path, const StepModelOptions& options) {
    return open_step_model(open_model_file(path), options);
}

std::vector<std::string> available_backends() { return backend::backend_names(); }

}  // namespace pagoda::model
