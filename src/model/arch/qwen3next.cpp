// qwen3next (llama.cpp's LLM_ARCH_QWEN3NEXT: Qwen3-Next-80B-A3B, Qwen3-Coder-Next): the gated DeltaNet
// hybrid of gated_delta_net.h with routed experts and a sigmoid-gated shared expert in every layer,
// Qwen3.5's predecessor. What differs from qwen35 is the file layout of the DeltaNet projections:
// - q|k|v and z: attn_qkv [dim, 2 key_dim + value_dim] and attn_gate [dim, value_dim] (llama.cpp's
//   converter since it splits in_proj_qkvz), or, in older files, the fused ssm_in [dim, 2 key_dim +
//   2 value_dim] as Hugging Face's in_proj_qkvz stores it: per key head g, the rows q_g (head), k_g
//   (head), then its group's value heads' v rows (group x head), then their z rows. The rows are
//   regrouped at load into q of every group | k | v, and z (one two-part weight either way).
// - beta and alpha: the fused ssm_ba [dim, 2 value heads], per key head g its group's beta rows then
//   its alpha rows, regrouped at load into beta and alpha.
// - value heads stay grouped (value head g * group + j belongs to key head g) everywhere: z, the gates,
//   ssm_dt, ssm_a, the conv's value channels and ssm_out's columns.
// Norm weights are stored as 1 + w by the converter (not ssm_norm); a quarter of each head rotates.
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/arch.h"
#include "model/arch/gated_delta_net.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {
namespace {

// The q|k|v and z row runs of ssm_in: per key head, [q, k, v of its group, z of its group].
std::vector<std::pair<std::string, std::vector<RowRun>>> qkvz_runs(const DeltaShape& d) {
    const int64_t vz = d.group() * d.head, per_group = 2 * d.head + 2 * vz;
    std::vector<RowRun> qkv, z;
    for (int64_t g = 0; g < d.k_heads; ++g) qkv.push_back({g * per_group, d.head});
    for (int64_t g = 0; g < d.k_heads; ++g) qkv.push_back({g * per_group + d.head, d.head});
    for (int64_t g = 0; g < d.k_heads; ++g) qkv.push_back({g * per_group + 2 * d.head, vz});
    for (int64_t g = 0; g < d.k_heads; ++g) z.push_back({g * per_group + 2 * d.head + vz, vz});
    return {{"qkv", std::move(qkv)}, {"z", std::move(z)}};
}

// The beta and alpha row runs of ssm_ba: per key head, [beta of its group, alpha of its group].
std::vector<std::pair<std::string, std::vector<RowRun>>> ba_runs(const DeltaShape& d) {
    std::vector<RowRun> beta, alpha;
    for (int64_t g = 0; g < d.k_heads; ++g) {
        beta.push_back({g * 2 * d.group(), d.group()});
        alpha.push_back({g * 2 * d.group() + d.group(), d.group()});
    }
    return {{"beta", std::move(beta)}, {"alpha", std::move(alpha)}};
}

HybridSpec qwen3next_spec(const gguf::File& file, const ModelConfig& c) {
    const DeltaShape d = read_delta_shape(file, c.arch + ".");
    return {.moe = true, .value_heads = ValueHeads::grouped,
            .project = [d, dim = c.dim](GraphEmitter& e, TensorBinder& bind, int32_t l, int h) {
                const std::string p = fmt::format("blk.{}.", l);
                const backend::Weight& qkvz =
                    bind.has(p + "ssm_in.weight")
                        ? bind.regrouped_matrix(p + "ssm_in.weight", dim, 2 * d.key_dim() + 2 * d.value_dim(), qkvz_runs(d))
                        : bind.matrix({{p + "attn_qkv.weight", dim, d.conv_dim()}, {p + "attn_gate.weight", dim, d.value_dim()}});
                const backend::Weight& ba = bind.regrouped_matrix(p + "ssm_ba.weight", dim, 2 * d.v_heads, ba_runs(d));
                const auto qkv_z = e.matmul(qkvz, h, {p + "qkv", p + "z"}, l, MatmulInput::attention);
                const auto beta_alpha = e.matmul(ba, h, {p + "beta", p + "alpha"}, l, MatmulInput::attention);
                return DeltaInputs{.qkv = qkv_z[0], .z = qkv_z[1], .alpha = beta_alpha[1], .beta = beta_alpha[0]};
            }};
}

}  // namespace

BuiltModel build_qwen3next(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    if (config.n_experts == 0) fail("{}: qwen3next needs experts ({}.expert_count)", file.name(), config.arch);
    return build_gated_delta_hybrid(file, config, backend, qwen3next_spec(file, config));
}

}  // namespace pagoda::model
