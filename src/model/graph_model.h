// The StepModel over (architecture builder, backend): the model's fused step graph, its executor and
// the paged KV cache in backend memory. Under a partial offload (StepModelOptions::n_gpu_layers) the
// graph runs as two stages, the device backend's first layers then the CPU's (layer_split.h), each
// with its part of the KV cache (split_kv_cache.h). forward() validates the batch (nothing is written for a bad
// one), runs the copy-on-write block copies, hands the step to the backend and runs the graph.
// A graph with recurrent layers (Rows::state tensors, qwen35) keeps one state per slot
// (StepModelInfo::n_state_slots): forward() runs the batch's state copies, zeroes the slot of a
// sequence starting at position 0, and refuses a batch whose sequence would skip or rewind its state.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/layer_router.h"
#include "model/lora_graph.h"
#include "model/open_step_model.h"
#include "model/staged_executor.h"

namespace pagoda::model {

class GraphModel final : public StepModel {
public:
    GraphModel(std::shared_ptr<const gguf::File> file, const StepModelOptions& options);

    const StepModelInfo& info() const override { return info_; }
    std::vector<float> forward(const Batch& batch) override;
    const std::vector<float>& hidden_rows() const override { return hidden_; }

    std::vector<std::span<const uint8_t>> weight_memory() const override;
    std::string matmul_arithmetic() const override;
    std::string describe_graph(int64_t n_tokens, int64_t n_logits, bool as_run) const override;
    std::string op_counts() const override { return executor_->op_counts(); }
    void set_activation_observer(ActivationObserver observer) override { observer_ = std::move(observer); }
    void set_interrupt_flag(const std::atomic<bool>* flag) override {
        executor_->set_interrupt_flag(flag);
        if (lora_executor_) lora_executor_->set_interrupt_flag(flag);
    }
    void set_op_times(OpTimes* times) override {
        op_times_ = times;
        executor_->set_op_times(times);
        if (lora_executor_) lora_executor_->set_op_times(times);
    }
    std::shared_ptr<const lora::Adapter> load_lora(const std::string& path, const std::string& name, float scale) override;
    bool supports_lora() const override { return lora_executor_ != nullptr; }
    bool can_transfer_kv() const override { return true; }
    void export_kv_block(int32_t block, std::span<uint8_t> out) const override { cache_->export_block(block, out); }
    void import_kv_block(int32_t block, std::span<const uint8_t> in) override { cache_->import_block(block, in); }

private:
    void validate(const Batch& batch) const;
    void validate_image_rows(const Batch& batch) const;
    void validate_state(const Batch& batch) const;
    // Runs the batch's state copies, zeroes the slots of sequences starting at position 0 and hands
    // the executor each row's slot.
    void prepare_state(const Batch& batch);
    // The graph as stages on their backends, fused where asked, each checked for its backend.
    std::unique_ptr<StagedExecutor> staged(const Graph& graph, bool fusion) const;
    void create_kv_cache(const StepModelOptions& o);

    std::shared_ptr<const gguf::File> file_;
    ModelConfig config_;
    std::unique_ptr<backend::Backend> device_;  // a partial offload's device backend (null: none)
    std::unique_ptr<backend::Backend> backend_;  // the one backend, or the host one of a partial offload
    LayerSplit split_;                           // device_layers 0: no split
    std::unique_ptr<LayerRouter> router_;        // where the builder uploaded under a split
    BuiltModel built_;
    std::unique_ptr<backend::KvCache> cache_;
    std::unique_ptr<StagedExecutor> executor_;
    std::unique_ptr<StagedExecutor> lora_executor_;  // the graph with lora_add nodes (options.lora)
    std::unique_ptr<LoraStep> lora_step_;
    StepModelInfo info_;
    ActivationObserver observer_;
    std::vector<int32_t> attend_from_;  // the step's span starts (backend/attention_span.h)
    std::vector<int32_t> logit_rows_, hidden_rows_;
    std::vector<float> hidden_;
    int32_t window_ = 0;  // info_.sliding_window
    OpTimes* op_times_ = nullptr;
    // Recurrent layers: per state slot, the tokens its state holds (-1: never used); the rows' slots.
    std::vector<int64_t> slot_tokens_;
    std::vector<int32_t> state_rows_;
};

}  // namespace pagoda::model
