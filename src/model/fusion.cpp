#include "model/fusion.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace pagoda::model {
namespace {

class Fuser {
public:
    Fuser(const Graph& g, const backend::Backend& b) : g_(g), b_(b), reads_(g.tensors.size(), 0) {
        for (const Node& n : g.nodes)
            for (int id : n.in) ++reads_[size_t(id)];
        if (g.output >= 0) reads_[size_t(g.output)] += 1;
        if (g.hidden >= 0) reads_[size_t(g.hidden)] += 1;
        for (int id : g.exported) reads_[size_t(id)] += 1;  // a later segment reads it
    }

    Graph run() {
        Graph out;
        out.tensors = g_.tensors;
        out.output = g_.output;
        out.hidden = g_.hidden;
        out.lora_targets = g_.lora_targets;
        out.state_slots = g_.state_slots;
        out.imported = g_.imported;
        out.exported = g_.exported;
        for (size_t i = 0; i < g_.nodes.size();) {
            size_t used = 0;
            Node fused;
            if (!used && b_.supports(OpKind::add_rms_norm)) used = add_rms_norm(i, fused);
            if (!used && b_.supports(OpKind::qkv_rope_kv_write)) used = qkv_rope_kv_write(i, fused);
            if (!used && b_.supports(OpKind::matmul_silu_mul)) used = matmul_silu_mul(i, fused);
            if (used) {
                out.nodes.push_back(std::move(fused));
                i += used;
            } else {
                out.nodes.push_back(g_.nodes[i++]);
            }
        }
        prepare_in_norms(out);
        return out;
    }

private:
    const Node* at(size_t i) const { return i < g_.nodes.size() ? &g_.nodes[i] : nullptr; }
    bool is(size_t i, OpKind kind) const { return at(i) && at(i)->kind == kind; }

    size_t add_rms_norm(size_t i, Node& fused) const {
        if (!is(i, OpKind::add) || !is(i + 1, OpKind::rms_norm)) return 0;
        const Node& add = g_.nodes[i];
        const Node& norm = g_.nodes[i + 1];
        if (norm.in[0] != add.out[0] || norm.n_heads > 0) return 0;
        fused = norm;
        fused.kind = OpKind::add_rms_norm;
        fused.in = {add.in[0], add.in[1]};
        fused.out = {add.out[0], norm.out[0]};
        return 2;
    }

    size_t qkv_rope_kv_write(size_t i, Node& fused) const {
        if (!is(i, OpKind::matmul) || at(i)->out.size() != 3) return 0;
        const Node& mm = g_.nodes[i];
        const int q = mm.out[0], k = mm.out[1], v = mm.out[2];
        backend::QkvOp op;
        op.qkv = mm.weight;
        std::array<int32_t, 3> lora = {-1, -1, -1};
        size_t j = i + 1 + lora_adds(i, lora);
        for (int part = 0; part < 3 && is(j, OpKind::add_bias); ++part, ++j) {
            if (at(j)->in[0] != mm.out[size_t(part)]) return 0;
            op.bias[part] = at(j)->vector;
        }
        if (op.bias[0] && !(op.bias[1] && op.bias[2])) return 0;
        if (!is(j, OpKind::rope) || !is(j + 1, OpKind::rope) || !is(j + 2, OpKind::kv_write)) return 0;
        const Node& rq = g_.nodes[j];
        const Node& rk = g_.nodes[j + 1];
        const Node& write = g_.nodes[j + 2];
        if (rq.in[0] != q || rk.in[0] != k || rq.rope != rk.rope || rq.head_dim != rk.head_dim) return 0;
        if (write.in[0] != k || write.in[1] != v) return 0;
        // k and v must not be read past the K/V write (q is the fused op's output).
        const int k_reads = (op.bias[1] ? 1 : 0) + (lora[1] >= 0 ? 1 : 0) + 2;
        const int v_reads = (op.bias[2] ? 1 : 0) + (lora[2] >= 0 ? 1 : 0) + 1;
        if (reads_[size_t(k)] != k_reads || reads_[size_t(v)] != v_reads) return 0;
        op.rope = rq.rope;
        op.layer = write.layer;
        op.n_heads = rq.n_heads;
        op.n_kv_heads = rk.n_heads;
        op.head_dim = rq.head_dim;
        fused = mm;
        fused.kind = OpKind::qkv_rope_kv_write;
        fused.out = {q};
        fused.qkv = op;
        fused.lora_parts = lora;
        return j + 3 - i;
    }

    size_t matmul_silu_mul(size_t i, Node& fused) const {
        if (!is(i, OpKind::matmul) || at(i)->out.size() != 2) return 0;
        std::array<int32_t, 3> lora = {-1, -1, -1};
        const size_t j = i + 1 + lora_adds(i, lora);
        if (!is(j, OpKind::silu_mul)) return 0;
        const Node& mm = g_.nodes[i];
        const Node& act = g_.nodes[j];
        if (act.in[0] != mm.out[0] || act.in[1] != mm.out[1]) return 0;
        for (size_t p = 0; p < 2; ++p)
            if (reads_[size_t(mm.out[p])] != 1 + (lora[p] >= 0 ? 1 : 0)) return 0;
        fused = mm;
        fused.kind = OpKind::matmul_silu_mul;
        fused.out = {act.out[0]};
        fused.lora_parts = lora;
        return j + 1 - i;
    }

    // The lora_add nodes right after the matmul at i (the LoRA twin graph, lora_graph.h), one per
    // part at most, when the backend takes them inside its fused ops: records each part's target and
    // returns how many there are (0 otherwise, and the chain then does not match).
    size_t lora_adds(size_t i, std::array<int32_t, 3>& targets) const {
        if (!b_.fuses_lora()) return 0;
        const Node& mm = g_.nodes[i];
        size_t used = 0;
        while (is(i + 1 + used, OpKind::lora_add)) {
            const Node& update = g_.nodes[i + 1 + used];
            const auto part = std::find(mm.out.begin(), mm.out.end(), update.in[1]);
            if (update.in[0] != mm.in[0] || part == mm.out.end() || update.out[0] != update.in[1]) break;
            const size_t p = size_t(part - mm.out.begin());
            if (p >= targets.size() || targets[p] >= 0) break;
            targets[p] = update.lora_target;
            ++used;
        }
        return used;
    }

    // The backend's own rewrite (Backend::prepared_input_cols): a norm whose output only matmuls
    // read, where the backend keeps a prepared form of that input for their weights, also writes that
    // form, and the matmuls read it: prepared once, in the norm's pass, instead of once per matmul.
    void prepare_in_norms(Graph& g) const {
        static auto reads_as_matmul_input = [](const Node& n, int h) {
            return multiplies_input(n.kind) && n.in.size() == 1 && n.in[0] == h;
        };
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            Node& norm = g.nodes[i];
            if (norm.kind != OpKind::rms_norm && norm.kind != OpKind::add_rms_norm) continue;
            if (norm.n_heads > 0 || norm.out.size() != (norm.kind == OpKind::rms_norm ? 1u : 2u)) continue;
            const int h = norm.out.back();
            std::vector<size_t> consumers;
            std::vector<const backend::Weight*> readers;
            bool only_matmuls = true;
            for (size_t j = i + 1; j < g.nodes.size(); ++j) {
                const Node& n = g.nodes[j];
                if (std::find(n.in.begin(), n.in.end(), h) == n.in.end()) continue;
                only_matmuls = only_matmuls && reads_as_matmul_input(n, h);
                readers.push_back(n.weight);
                consumers.push_back(j);
            }
            if (h == g.output || h == g.hidden || std::find(g.exported.begin(), g.exported.end(), h) != g.exported.end())
                only_matmuls = false;
            if (!only_matmuls || consumers.empty()) continue;
            const int64_t cols = b_.prepared_input_cols(g.tensors[size_t(h)].cols, readers);
            if (cols <= 0) continue;
            const TensorSpec spec = g.tensors[size_t(h)];
            const int q = g.add_tensor(spec.name + ".prepared", spec.rows, cols);
            norm.out.push_back(q);
            for (size_t j : consumers) g.nodes[j].in.push_back(q);
        }
    }

    const Graph& g_;
    const backend::Backend& b_;
    std::vector<int> reads_;
};

}  // namespace

Graph fuse(const Graph& graph, const backend::Backend& backend) { return Fuser(graph, backend).run(); }

bool fusion_enabled_by_env() {
    const char* env = std::getenv("PAGODA_FUSION");
    if (!env || !*env) return true;
    const std::string v = env;
    if (v == "1") return true;
    if (v == "0") return false;
    fail("PAGODA_FUSION={} is not 0 or 1", v);
}

}  // namespace pagoda::model
