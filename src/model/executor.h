// Runs a Graph on a Backend. At construction every tensor gets a fixed place in the backend's
// activation arena, chosen by liveness (tensors whose lifetimes do not overlap share memory, so the
// arena holds a handful of activations, not one per op); reserve(max_tokens) sizes the arena once
// for steps of up to that many tokens, so running a step allocates nothing. A segment of a split graph
// (Graph::imported / exported) places its imported tensors before the first op and keeps its exported
// ones until after the last, for the caller to copy in and out (staged_executor.h).
#pragma once
#include <atomic>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/graph.h"
#include "model/step_model.h"

namespace pagoda::model {

class GraphExecutor {
public:
    GraphExecutor(Graph graph, backend::Backend& backend);

    const Graph& graph() const { return graph_; }
    // Arena elements per token row of capacity: the sum of the columns live at once, at most.
    int64_t arena_row_elements() const { return row_elements_; }
    void reserve(int64_t max_tokens);
    int64_t capacity() const { return capacity_; }  // token rows each step tensor has room for
    // Where tensor `id` lives in a step of `rows` (a segment's imported / exported tensors are copied
    // through it between backends; valid until the next reserve).
    backend::Tensor tensor_of(int id, StepRows rows) const { return tensor(id, rows); }

    // Runs one step (backend.begin_step already called) and copies the logits (rows.logits x vocab)
    // to `logits` and, when the graph has one, the hidden state (rows.hidden x dim) to `hidden`.
    void run(backend::KvCache& cache, StepRows rows, std::vector<float>& logits, std::vector<float>& hidden,
             const ActivationObserver* observer = nullptr);
    // run() checks the flag before each op and throws StepInterrupted once it is true.
    void set_interrupt_flag(const std::atomic<bool>* flag) { interrupt_ = flag; }
    // While set, run() adds each op's wall-clock time to *times under its op_name, and that of each op
    // that streams a weight also under the weight's role, with the weight's bytes (OpTimes::by_weight).
    void set_op_times(OpTimes* times);
    // The LoRA updates of the next run()s, per Graph::lora_targets entry (null or empty: none).
    void set_lora_segments(const std::vector<std::vector<backend::LoraSegment>>* by_target) { lora_ = by_target; }
    // The next run()'s given input embeddings (input_embeddings op): `rows` increasing step rows and
    // their embeddings, rows.size() x the input's width; the caller keeps both alive through run().
    void set_input_embeddings(std::span<const int32_t> rows, const float* embeddings) {
        embedding_rows_ = rows;
        embeddings_ = embeddings;
    }
    // Whether the graph takes input embeddings at all.
    bool takes_input_embeddings() const;

    // --- recurrent state (Rows::state tensors: Graph::state_slots rows each, kept across steps and
    // across reserve(), after the step rows in the arena) ---
    bool has_state() const { return state_elements_ > 0; }
    // The next run()'s state row per token (its sequence's slot); the caller keeps it alive.
    void set_state_rows(std::span<const int32_t> rows) { state_rows_ = rows; }
    // Zeroes slot `slot` of every state tensor (a sequence starting at position 0).
    void reset_state(int32_t slot);
    // Copies slot src to slot dst in every state tensor (a forked sequence).
    void copy_state(int32_t src, int32_t dst);

private:
    backend::Tensor tensor(int id, StepRows rows) const;
    void observe(const Node& node, const backend::Tensor& input, const ActivationObserver& observer);

    Graph graph_;
    backend::Backend& backend_;
    backend::Tensor state_row(int id, int32_t slot) const;
    backend::Tensor state_region() const;  // every state tensor, as one row
    void delta_gates(const Node& node, const backend::Tensor& alpha, const backend::Tensor& beta);
    std::vector<float> gates_host_;
    std::vector<int64_t> column_offset_;  // per tensor, in the per-token row space
    std::vector<int64_t> state_offset_;   // per Rows::state tensor: elements after the step rows (-1: none)
    int64_t state_elements_ = 0;
    std::span<const int32_t> state_rows_;
    std::vector<float> state_host_;       // a state row, or every state tensor across a reserve()
    int64_t row_elements_ = 0;
    int64_t capacity_ = 0;  // tokens the arena holds per tensor
    std::vector<float> observed_;
    std::vector<backend::Tensor> outs_;
    const std::atomic<bool>* interrupt_ = nullptr;
    OpTimes* op_times_ = nullptr;
    const std::vector<std::vector<backend::LoraSegment>>* lora_ = nullptr;
    backend::PartLora part_lora_;  // a fused op's updates this step (part_lora)
    // The fused op's PartLora for this step (Node::lora_parts), or null when no part has an update.
    const backend::PartLora* part_lora(const Node& node);
    std::span<const int32_t> embedding_rows_;
    const float* embeddings_ = nullptr;
    std::vector<float> embedding_scratch_;  // input_embeddings: the step tensor on the host
    std::vector<OpTimes::Entry> step_op_times_;  // per OpKind, this step's (merged into op_times_ after it)
    std::vector<OpTimes::Entry> step_weight_times_;  // per MatmulInput role, the same
    std::vector<uint64_t> node_weight_bytes_;        // per node: host weight memory it streams (0: none)
};

}  // namespace pagoda::model
