#include "model/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "core/error.h"

namespace pagoda::model {
namespace {

// First-fit allocation of column intervals: a tensor of c columns takes c elements of every
// token row of the arena's capacity.
class IntervalAllocator {
public:
    int64_t take(int64_t cols) {
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < cols) continue;
            const int64_t begin = it->first, len = it->second;
            free_.erase(it);
            if (len > cols) free_[begin + cols] = len - cols;
            return begin;
        }
        const int64_t begin = end_;
        end_ += cols;
        return begin;
    }
    void give(int64_t begin, int64_t cols) {
        auto [it, ok] = free_.emplace(begin, cols);
        auto next = std::next(it);
        if (next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
        if (it != free_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_.erase(it);
            }
        }
    }
    int64_t end() const { return end_; }

private:
    std::map<int64_t, int64_t> free_;  // begin -> length
    int64_t end_ = 0;
};

}  // namespace

GraphExecutor::GraphExecutor(Graph graph, backend::Backend& backend) : graph_(std::move(graph)), backend_(backend) {
    const size_t n = graph_.tensors.size();
    if (graph_.output >= 0 ? size_t(graph_.output) >= n : graph_.hidden < 0 && graph_.exported.empty())
        fail("graph: no output tensor (neither logits nor a hidden state)");
    for (int id : graph_.imported)
        if (id < 0 || size_t(id) >= n) fail("graph: imported tensor {} is not a tensor", id);
    std::vector<int> last_use(n, -1);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
        for (int id : graph_.nodes[i].in) last_use[size_t(id)] = int(i);
        for (int id : graph_.nodes[i].out) last_use[size_t(id)] = std::max(last_use[size_t(id)], int(i));
    }
    if (graph_.output >= 0) last_use[size_t(graph_.output)] = int(graph_.nodes.size());  // read back after the last op
    if (graph_.hidden >= 0) {
        if (size_t(graph_.hidden) >= n) fail("graph: the hidden output is not a tensor");
        last_use[size_t(graph_.hidden)] = int(graph_.nodes.size());
    }
    for (int id : graph_.exported) {
        if (id < 0 || size_t(id) >= n) fail("graph: exported tensor {} is not a tensor", id);
        last_use[size_t(id)] = int(graph_.nodes.size());  // copied out after the last op
    }
    column_offset_.assign(n, -1);
    state_offset_.assign(n, -1);
    for (size_t id = 0; id < n; ++id) {  // persistent: placed once, after the step rows, never shared
        const TensorSpec& spec = graph_.tensors[id];
        if (spec.rows != Rows::state) continue;
        if (graph_.state_slots <= 0) fail("graph: state tensor {} but no state slots", spec.name);
        state_offset_[id] = state_elements_;
        column_offset_[id] = 0;  // counts as written: it holds the state of earlier steps
        state_elements_ += graph_.state_slots * spec.cols;
    }
    IntervalAllocator columns;
    for (int id : graph_.imported)  // written before the first op (copied in from another backend)
        if (column_offset_[size_t(id)] < 0) column_offset_[size_t(id)] = columns.take(graph_.tensors[size_t(id)].cols);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
        const Node& node = graph_.nodes[i];
        for (int id : node.in)
            if (column_offset_[size_t(id)] < 0) fail("graph: op {} ({}) reads tensor {} before it is written", i,
                                                     op_name(node.kind), graph_.tensors[size_t(id)].name);
        // Outputs are placed before the op's last-use inputs are freed: an op never writes over
        // an input it is still reading (in-place ops name the input itself).
        for (int id : node.out)
            if (column_offset_[size_t(id)] < 0) column_offset_[size_t(id)] = columns.take(graph_.tensors[size_t(id)].cols);
        std::vector<int> done;
        for (int id : node.in)
            if (state_offset_[size_t(id)] < 0) done.push_back(id);
        for (int id : node.out)
            if (state_offset_[size_t(id)] < 0) done.push_back(id);
        std::sort(done.begin(), done.end());
        done.erase(std::unique(done.begin(), done.end()), done.end());
        for (int id : done)
            if (last_use[size_t(id)] == int(i)) columns.give(column_offset_[size_t(id)], graph_.tensors[size_t(id)].cols);
    }
    row_elements_ = columns.end();
}

bool GraphExecutor::takes_input_embeddings() const {
    return std::any_of(graph_.nodes.begin(), graph_.nodes.end(),
                       [](const Node& n) { return n.kind == OpKind::input_embeddings; });
}

void GraphExecutor::reserve(int64_t max_tokens) {
    if (max_tokens <= capacity_) return;
    // The state moves with the step rows' end and a backend need not keep the arena's bytes when it
    // grows: it crosses through the host (a rare event: the model reserves its step size at load).
    const bool keep = state_elements_ > 0 && capacity_ > 0;
    if (keep) {
        state_host_.resize(size_t(state_elements_));
        backend_.read(state_region(), state_host_.data());
    }
    capacity_ = max_tokens;
    backend_.reserve_activations(size_t(capacity_ * row_elements_ + state_elements_) * backend_.activation_size(),
                                 capacity_);
    if (keep) backend_.write(state_region(), state_host_.data());
}

backend::Tensor GraphExecutor::state_region() const {
    auto* base = static_cast<uint8_t*>(backend_.activations());
    return {base + size_t(capacity_ * row_elements_) * backend_.activation_size(), 1, state_elements_};
}

backend::Tensor GraphExecutor::state_row(int id, int32_t slot) const {
    const backend::Tensor all = tensor(id, {});
    if (slot < 0 || slot >= all.rows) fail("state slot {} is outside the {} slots", slot, all.rows);
    return {static_cast<uint8_t*>(all.data) + size_t(slot * all.cols) * backend_.activation_size(), 1, all.cols};
}

void GraphExecutor::reset_state(int32_t slot) {
    for (size_t id = 0; id < state_offset_.size(); ++id) {
        if (state_offset_[id] < 0) continue;
        const backend::Tensor row = state_row(int(id), slot);
        state_host_.assign(size_t(row.cols), 0.0f);
        backend_.write(row, state_host_.data());
    }
}

void GraphExecutor::copy_state(int32_t src, int32_t dst) {
    for (size_t id = 0; id < state_offset_.size(); ++id) {
        if (state_offset_[id] < 0) continue;
        const backend::Tensor from = state_row(int(id), src), to = state_row(int(id), dst);
        state_host_.resize(size_t(from.cols));
        backend_.read(from, state_host_.data());
        backend_.write(to, state_host_.data());
    }
}

backend::Tensor GraphExecutor::tensor(int id, StepRows rows) const {
    const TensorSpec& spec = graph_.tensors[size_t(id)];
    auto* base = static_cast<uint8_t*>(backend_.activations());
    if (spec.rows == Rows::state) {
        const size_t at = size_t(capacity_ * row_elements_ + state_offset_[size_t(id)]);
        return {base + at * backend_.activation_size(), graph_.state_slots, spec.cols};
    }
    const size_t offset = size_t(column_offset_[size_t(id)] * capacity_) * backend_.activation_size();
    return {base + offset, rows.of(spec.rows), spec.cols};
}

void GraphExecutor::delta_gates(const Node& node, const backend::Tensor& alpha, const backend::Tensor& beta) {
    const size_t n = size_t(alpha.rows * alpha.cols), heads = size_t(alpha.cols);
    if (node.gates.a.size() != heads || node.gates.dt_bias.size() != heads || beta.cols != alpha.cols)
        fail("delta_gates: {} value heads, {} decays, {} time-step biases", heads, node.gates.a.size(),
             node.gates.dt_bias.size());
    gates_host_.resize(2 * n);
    float* g = gates_host_.data();
    float* w = g + n;
    backend_.read(alpha, g);
    backend_.read(beta, w);
    for (size_t i = 0; i < n; ++i) {
        // softplus as ggml computes it: x itself above 20, where log1p(e^x) rounds to x anyway
        const double x = double(g[i]) + double(node.gates.dt_bias[i % heads]);
        const double softplus = x > 20 ? x : std::log1p(std::exp(x));
        g[i] = float(softplus * double(node.gates.a[i % heads]));
        w[i] = float(1.0 / (1.0 + std::exp(-double(w[i]))));
    }
    backend_.write(alpha, g);
    backend_.write(beta, w);
}

void GraphExecutor::observe(const Node& node, const backend::Tensor& input, const ActivationObserver& observer) {
    if (node.role == MatmulInput::none) return;
    observed_.resize(size_t(input.rows * input.cols));
    backend_.read(input, observed_.data());
    observer(node.layer, node.role, observed_.data(), input.rows, input.cols);
}

namespace {

constexpr size_t kRoles = size_t(MatmulInput::output) + 1;

const char* weight_role_name(MatmulInput role) {
    switch (role) {
        case MatmulInput::attention: return "attention q|k|v";
        case MatmulInput::attention_output: return "attention output";
        case MatmulInput::ffn: return "ffn gate|up";
        case MatmulInput::ffn_down: return "ffn down";
        case MatmulInput::output: return "output head";
        case MatmulInput::none: break;
    }
    return "other";
}

uint64_t host_bytes(const backend::Weight* w) {
    uint64_t n = 0;
    if (w)
        for (const auto& span : w->host_memory()) n += span.size();
    return n;
}

}  // namespace

const backend::PartLora* GraphExecutor::part_lora(const Node& node) {
    if (!lora_) return nullptr;
    bool any = false;
    for (size_t p = 0; p < node.lora_parts.size(); ++p) {
        const int32_t target = node.lora_parts[p];
        part_lora_.parts[p] = target >= 0 && size_t(target) < lora_->size() ? std::span((*lora_)[size_t(target)])
                                                                           : std::span<const backend::LoraSegment>();
        any = any || !part_lora_.parts[p].empty();
    }
    return any ? &part_lora_ : nullptr;
}

void GraphExecutor::set_op_times(OpTimes* times) {
    op_times_ = times;
    if (!times || !node_weight_bytes_.empty()) return;
    // The weights are bound for the executor's life, so their sizes are taken once.
    node_weight_bytes_.reserve(graph_.nodes.size());
    for (const Node& node : graph_.nodes)
        node_weight_bytes_.push_back(host_bytes(node.kind == OpKind::qkv_rope_kv_write ? node.qkv.qkv
                                                : node.kind == OpKind::embed ||
                                                          node.kind == OpKind::position_embedding ||
                                                          node.kind == OpKind::token_type_embedding ? nullptr
                                                                                      : node.weight));
}

void GraphExecutor::run(backend::KvCache& cache, StepRows rows, std::vector<float>& logits, std::vector<float>& hidden,
                        const ActivationObserver* observer) {
    if (rows.tokens > capacity_) reserve(rows.tokens);  // between steps, never inside one
    auto& b = backend_;
    std::vector<backend::Tensor>& outs = outs_;  // kept across steps: nothing is allocated in a step
    using Clock = std::chrono::steady_clock;
    if (op_times_) {
        step_op_times_.assign(step_op_times_.size(), {});
        step_weight_times_.assign(kRoles, {});
    }
    for (size_t node_index = 0; node_index < graph_.nodes.size(); ++node_index) {
        const Node& node = graph_.nodes[node_index];
        if (interrupt_ && interrupt_->load(std::memory_order_relaxed)) throw StepInterrupted();
        // Timed when asked: the op's backend call, however it ends (an op that throws still counts);
        // an op that streams a weight also under the weight's role.
        struct OpTimer {
            std::vector<OpTimes::Entry>* acc;
            size_t kind;
            OpTimes::Entry* weight;  // null: the op streams no weight
            double weight_bytes;
            Clock::time_point start;
            ~OpTimer() {
                if (!acc) return;
                const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
                if (acc->size() <= kind) acc->resize(kind + 1);
                (*acc)[kind].calls += 1;
                (*acc)[kind].seconds += seconds;
                if (!weight) return;
                weight->calls += 1;
                weight->seconds += seconds;
                weight->weight_bytes += weight_bytes;
            }
        };
        const uint64_t streamed = op_times_ ? node_weight_bytes_[node_index] : 0;
        OpTimer op_timer{op_times_ ? &step_op_times_ : nullptr, size_t(node.kind),
                         streamed > 0 ? &step_weight_times_[size_t(node.role)] : nullptr, double(streamed),
                         op_times_ ? Clock::now() : Clock::time_point{}};
        auto in = [&](size_t i) { return tensor(node.in[i], rows); };
        auto out = [&](size_t i) { return tensor(node.out[i], rows); };
        backend::Tensor prepared;  // a matmul-type op's second input: the first one's prepared form
        const backend::Tensor* q = nullptr;
        if (node.in.size() == 2 && multiplies_input(node.kind)) {
            prepared = in(1);
            q = &prepared;
        }
        if (observer && multiplies_input(node.kind)) observe(node, in(0), *observer);
        switch (node.kind) {
            case OpKind::embed: b.embed(*node.weight, out(0)); break;
            case OpKind::matmul:
                outs.clear();
                for (size_t i = 0; i < node.out.size(); ++i) outs.push_back(out(i));
                b.matmul(*node.weight, in(0), outs, q);
                break;
            case OpKind::rms_norm:
                if (node.n_heads > 0) {  // each head a row of its own (in place)
                    backend::Tensor heads = in(0);
                    heads.rows *= node.n_heads;
                    heads.cols /= node.n_heads;
                    b.rms_norm(heads, *node.vector, node.eps, heads);
                } else if (node.out.size() == 2) {  // also writes its output's prepared form (fusion.h)
                    b.norm_prepare(in(0), nullptr, *node.vector, node.eps, out(0), out(1));
                } else {
                    b.rms_norm(in(0), *node.vector, node.eps, out(0));
                }
                break;
            case OpKind::add: b.add(in(0), in(1)); break;
            case OpKind::add_bias: b.add_bias(in(0), *node.vector); break;
            case OpKind::rope: b.rope(in(0), *node.rope, node.n_heads, node.head_dim); break;
            case OpKind::silu_mul: b.silu_mul(in(0), in(1), out(0)); break;
            case OpKind::gelu_mul: b.gelu_mul(in(0), in(1), out(0)); break;
            case OpKind::softmax: b.softmax(in(0)); break;
            case OpKind::kv_write: b.kv_write(cache, node.layer, in(0), in(1)); break;
            case OpKind::attention: b.attention(cache, node.layer, in(0), out(0), node.attention); break;
            case OpKind::gather_logit_rows: b.gather_logit_rows(in(0), out(0)); break;
            case OpKind::gather_hidden_rows: b.gather_hidden_rows(in(0), out(0)); break;
            case OpKind::layer_norm: b.layer_norm(in(0), *node.vector, *node.bias, node.eps, out(0)); break;
            case OpKind::gelu: b.gelu(in(0)); break;
            case OpKind::position_embedding: b.add_position_embedding(*node.weight, in(0)); break;
            case OpKind::token_type_embedding: b.add_token_type_embedding(*node.weight, in(0)); break;
            case OpKind::moe_ffn: b.moe_ffn(node.moe, in(0), in(1), out(0), out(1)); break;
            case OpKind::lora_add:
                if (lora_ && size_t(node.lora_target) < lora_->size() && !(*lora_)[size_t(node.lora_target)].empty())
                    b.lora_add(in(0), in(1), (*lora_)[size_t(node.lora_target)]);
                break;
            case OpKind::input_embeddings: {
                // Slice 0 replaces the given rows' token embeddings, a deep-stack slice adds to their
                // hidden state. They cross a run of consecutive rows (an image) at a time, not a row
                // at a time: on a device each crossing is a host wait (row by row, a Qwen3-VL prefill
                // on Vulkan waited 5 times per image row). Only the given rows are written back, so
                // the others keep the backend's own precision (the reference's doubles).
                if (embedding_rows_.empty()) break;
                const backend::Tensor x = in(0);
                const size_t row_bytes = size_t(x.cols) * b.activation_size();
                const int64_t stride = x.cols * node.embedding_slices;
                std::vector<float>& rows = embedding_scratch_;
                rows.resize(size_t(x.rows * x.cols));
                if (node.embedding_slice > 0) b.read(x, rows.data());
                for (size_t i = 0, end = 0; i < embedding_rows_.size(); i = end) {
                    for (end = i + 1; end < embedding_rows_.size() && embedding_rows_[end] == embedding_rows_[end - 1] + 1;) ++end;
                    for (size_t k = i; k < end; ++k) {
                        float* row = rows.data() + int64_t(embedding_rows_[k]) * x.cols;
                        const float* given = embeddings_ + int64_t(k) * stride + node.embedding_slice * x.cols;
                        if (node.embedding_slice == 0) std::copy(given, given + x.cols, row);
                        else
                            for (int64_t c = 0; c < x.cols; ++c) row[c] += given[c];
                    }
                    const int64_t first = embedding_rows_[i];
                    b.write({static_cast<uint8_t*>(x.data) + size_t(first) * row_bytes, int64_t(end - i), x.cols},
                            rows.data() + first * x.cols);
                }
                break;
            }
            case OpKind::copy_columns: b.copy_columns(in(0), out(0), node.columns); break;
            case OpKind::causal_conv1d: {
                backend::CausalConv1d op = node.conv;
                op.state_rows = state_rows_;
                b.causal_conv1d(op, in(0), in(1), out(0));
                break;
            }
            case OpKind::gated_delta_rule: {
                backend::GatedDeltaRule op = node.delta;
                op.state_rows = state_rows_;
                b.gated_delta_rule(op, in(0), in(1), in(2), in(3), in(4), in(5), out(0));
                break;
            }
            case OpKind::sigmoid_mul: b.sigmoid_mul(in(0), in(1), out(0)); break;
            case OpKind::delta_gates: delta_gates(node, in(0), in(1)); break;
            case OpKind::scale: b.scale(in(0), node.value); break;
            case OpKind::softcap: b.softcap(in(0), node.value); break;
            case OpKind::attn_temperature: b.attn_temperature(in(0), node.temperature); break;
            case OpKind::add_rms_norm:
                if (node.out.size() == 3) {  // also writes its output's prepared form (fusion.h)
                    const backend::Tensor r = in(1);
                    b.norm_prepare(in(0), &r, *node.vector, node.eps, out(1), out(2));
                } else {
                    b.add_rms_norm(in(0), in(1), *node.vector, node.eps, out(1));
                }
                break;
            case OpKind::qkv_rope_kv_write: b.qkv_rope_kv_write(cache, node.qkv, in(0), out(0), q, part_lora(node)); break;
            case OpKind::matmul_silu_mul: b.matmul_silu_mul(*node.weight, in(0), out(0), q, part_lora(node)); break;
        }
    }
    if (op_times_)
        for (size_t k = 0; k < step_op_times_.size(); ++k) {
            if (step_op_times_[k].calls == 0) continue;
            OpTimes::Entry& e = op_times_->by_op[op_name(OpKind(k))];
            e.calls += step_op_times_[k].calls;
            e.seconds += step_op_times_[k].seconds;
        }
    if (op_times_)
        for (size_t r = 0; r < kRoles; ++r) {
            if (step_weight_times_[r].calls == 0) continue;
            OpTimes::Entry& e = op_times_->by_weight[weight_role_name(MatmulInput(r))];
            e.calls += step_weight_times_[r].calls;
            e.seconds += step_weight_times_[r].seconds;
            e.weight_bytes += step_weight_times_[r].weight_bytes;
        }
    logits.clear();
    if (graph_.output >= 0) {
        const backend::Tensor result = tensor(graph_.output, rows);
        logits.resize(size_t(result.rows * result.cols));
        if (!logits.empty()) b.read(result, logits.data());
    }
    hidden.clear();
    if (graph_.hidden >= 0 && rows.hidden > 0) {
        const backend::Tensor h = tensor(graph_.hidden, rows);
        hidden.resize(size_t(h.rows * h.cols));
        b.read(h, hidden.data());
    }
}

}  // namespace pagoda::model
