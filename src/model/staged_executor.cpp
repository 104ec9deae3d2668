#include "model/staged_executor.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::model {

StagedExecutor::StagedExecutor(std::vector<Stage> stages) : stages_(std::move(stages)) {
    if (stages_.empty()) fail("staged executor: no stage");
    for (Stage& s : stages_) executors_.push_back(std::make_unique<GraphExecutor>(std::move(s.graph), *s.backend));
    for (size_t i = 1; i < executors_.size(); ++i)
        if (executors_[i]->graph().imported != executors_[i - 1]->graph().exported)
            fail("staged executor: stage {} imports other tensors than stage {} exports", i, i - 1);
}

std::string StagedExecutor::op_counts() const {
    if (stages_.size() == 1) return graph().op_counts();
    std::string out;
    for (size_t i = 0; i < stages_.size(); ++i)
        out += fmt::format("{}{}: {}", i ? "; " : "", stages_[i].backend->name(), graph(i).op_counts());
    return out;
}

int64_t StagedExecutor::hidden_cols() const {
    const Graph& g = graph(stages_.size() - 1);
    return g.hidden >= 0 ? g.tensors[size_t(g.hidden)].cols : 0;
}

void StagedExecutor::reserve(int64_t max_tokens) {
    for (auto& e : executors_) e->reserve(max_tokens);
}

int64_t StagedExecutor::capacity() const { return executors_[0]->capacity(); }

void StagedExecutor::begin_step(const backend::StepInputs& inputs) {
    for (const Stage& s : stages_) s.backend->begin_step(inputs);
}

void StagedExecutor::run(StepRows rows, std::vector<float>& logits, std::vector<float>& hidden,
                         const ActivationObserver* observer) {
    for (size_t i = 0; i < executors_.size(); ++i) {
        if (i > 0) {
            if (rows.tokens > 0) executors_[i]->reserve(rows.tokens);  // before its tensors are placed
            for (int id : executors_[i]->graph().imported) {
                const backend::Tensor from = executors_[i - 1]->tensor_of(id, rows);
                const backend::Tensor to = executors_[i]->tensor_of(id, rows);
                if (from.rows * from.cols == 0) continue;
                crossing_.resize(size_t(from.rows * from.cols));
                stages_[i - 1].backend->read(from, crossing_.data());
                stages_[i].backend->write(to, crossing_.data());
            }
        }
        executors_[i]->run(*stages_[i].cache, rows, logits, hidden, observer);
    }
}

void StagedExecutor::set_interrupt_flag(const std::atomic<bool>* flag) {
    for (auto& e : executors_) e->set_interrupt_flag(flag);
}

void StagedExecutor::set_op_times(OpTimes* times) {
    for (auto& e : executors_) e->set_op_times(times);
}

void StagedExecutor::set_lora_segments(const std::vector<std::vector<backend::LoraSegment>>* by_target) {
    for (auto& e : executors_) e->set_lora_segments(by_target);
}

void StagedExecutor::set_input_embeddings(std::span<const int32_t> rows, const float* embeddings) {
    for (auto& e : executors_) e->set_input_embeddings(rows, embeddings);
}

}  // namespace pagoda::model
