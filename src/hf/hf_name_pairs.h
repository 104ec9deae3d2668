// Tensor names of the encoder folders read by a table (nomic-bert, jina-bert-v2): "<hf>.weight|bias"
// <-> "<gguf>.weight|bias" for the top-level pairs and "<hf layers><N>.<hf>" <-> "blk.<N>.<gguf>" for
// the per-layer ones, in both directions, with the layer index strict (no sign, no leading zeros).
#pragma once
#include <charconv>
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf::detail {

struct NamePair {
    const char* hf;
    const char* gguf;
};

// "x.weight" -> ("x", "weight"), likewise ".bias"; nullopt otherwise.
inline std::optional<std::pair<std::string_view, std::string_view>> split_param(std::string_view name) {
    for (std::string_view p : {std::string_view("weight"), std::string_view("bias")})
        if (name.size() > p.size() + 1 && name.ends_with(p) && name[name.size() - p.size() - 1] == '.')
            return std::pair{name.substr(0, name.size() - p.size() - 1), p};
    return std::nullopt;
}

// "<layers><N>.<tail>" -> (N, tail) with N a layer index without leading zeros.
inline std::optional<std::pair<int64_t, std::string_view>> split_layer(std::string_view base, std::string_view layers) {
    if (!base.starts_with(layers)) return std::nullopt;
    const std::string_view after = base.substr(layers.size());
    int64_t layer = -1;
    const auto [end, ec] = std::from_chars(after.data(), after.data() + after.size(), layer);
    const size_t digits = size_t(end - after.data());
    if (ec != std::errc() || layer < 0 || digits >= after.size() || after[digits] != '.' || (digits > 1 && after[0] == '0'))
        return std::nullopt;
    return std::pair{layer, after.substr(digits + 1)};
}

// The GGUF name of HF tensor `rest` (its folder prefix removed), layers below `n_layers` only; nullopt
// where no pair names it.
inline std::optional<std::string> gguf_name_of(std::span<const NamePair> top, std::span<const NamePair> layers,
                                               std::string_view hf_layers, int64_t n_layers, std::string_view rest) {
    const auto split = split_param(rest);
    if (!split) return std::nullopt;
    const auto& [base, param] = *split;
    for (const NamePair& p : top)
        if (base == p.hf) return fmt::format("{}.{}", p.gguf, param);
    const auto layer = split_layer(base, hf_layers);
    if (!layer || layer->first >= n_layers) return std::nullopt;
    for (const NamePair& p : layers)
        if (layer->second == p.hf) return fmt::format("blk.{}.{}.{}", layer->first, p.gguf, param);
    return std::nullopt;
}

// The HF name of GGUF tensor `name`; nullopt where no pair names it.
inline std::optional<std::string> hf_name_of(std::span<const NamePair> top, std::span<const NamePair> layers,
                                             std::string_view hf_layers, std::string_view name) {
    if (const auto split = split_param(name)) {
        const auto& [base, param] = *split;
        for (const NamePair& p : top)
            if (base == p.gguf) return fmt::format("{}.{}", p.hf, param);
        if (const auto layer = split_layer(base, "blk."))
            for (const NamePair& p : layers)
                if (layer->second == p.gguf) return fmt::format("{}{}.{}.{}", hf_layers, layer->first, p.hf, param);
    }
    return std::nullopt;
}

// The GGUF tensor of HF tensor `name`, tried under each of m.prefixes: `match(rest)` names it, or
// `dropped(rest)` says the folder carries it and pagoda skips it (nullopt); anything else is an error
// naming the tensor.
template <typename Match, typename Dropped>
std::optional<TensorTarget> target_under_prefixes(const HfModel& m, std::string_view name, Match&& match, Dropped&& dropped) {
    for (const std::string& prefix : m.prefixes) {
        if (!name.starts_with(prefix)) continue;
        const std::string_view rest = name.substr(prefix.size());
        if (auto t = match(rest)) return t;
        if (dropped(rest)) return std::nullopt;
    }
    fail("tensor '{}' is not a tensor pagoda knows for {}", name, m.hf_arch);
}

}  // namespace pagoda::hf::detail
