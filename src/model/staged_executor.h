// Runs a step graph as stages on their own backends: the whole graph as one stage, or the segments of
// a partial offload (layer_split.h), each with its own GraphExecutor (arena) and KV cache part. After
// a stage runs, the tensors the next one imports are read to host floats and written into its arena:
// the activations cross once at each boundary.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/executor.h"

namespace pagoda::model {

class StagedExecutor {
public:
    struct Stage {
        backend::Backend* backend = nullptr;
        backend::KvCache* cache = nullptr;  // the stage's own layers
        Graph graph;                        // fused for `backend` already
    };
    explicit StagedExecutor(std::vector<Stage> stages);

    size_t n_stages() const { return stages_.size(); }
    const Graph& graph(size_t stage = 0) const { return executors_[stage]->graph(); }
    backend::Backend& backend(size_t stage = 0) const { return *stages_[stage].backend; }
    // Op counts of every stage ("matmul 155, ..."; a split model's per backend).
    std::string op_counts() const;
    // Columns of the graph's final hidden state (0: none).
    int64_t hidden_cols() const;
    bool takes_input_embeddings() const { return executors_.front()->takes_input_embeddings(); }

    void reserve(int64_t max_tokens);
    // Token rows each step tensor of the first stage has room for (GraphExecutor::capacity).
    int64_t capacity() const;
    // Hands the step to every stage's backend.
    void begin_step(const backend::StepInputs& inputs);
    // As GraphExecutor::run, over the stages in order.
    void run(StepRows rows, std::vector<float>& logits, std::vector<float>& hidden, const ActivationObserver* observer);

    void set_interrupt_flag(const std::atomic<bool>* flag);
    void set_op_times(OpTimes* times);
    void set_lora_segments(const std::vector<std::vector<backend::LoraSegment>>* by_target);
    void set_input_embeddings(std::span<const int32_t> rows, const float* embeddings);
    // The recurrent state (GraphExecutor's; a graph with state runs as one stage).
    bool has_state() const { return executors_.front()->has_state(); }
    void set_state_rows(std::span<const int32_t> rows) { executors_.front()->set_state_rows(rows); }
    void reset_state(int32_t slot) { executors_.front()->reset_state(slot); }
    void copy_state(int32_t src, int32_t dst) { executors_.front()->copy_state(src, dst); }

private:
    std::vector<Stage> stages_;
    std::vector<std::unique_ptr<GraphExecutor>> executors_;
    std::vector<float> crossing_;  // host staging of one boundary tensor
};

}  // namespace pagoda::model
