// What the architecture tests share to check load errors and stored-but-unread layouts: a copy of a
// gen-model file with keys or tensors left out, keys replaced or a tensor cut short, and the error
// that loading a file gives.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"

namespace pagoda::model::gguf_edit {

struct Edit {
    std::vector<std::string> drop;                        // keys and tensors of these names
    std::vector<std::pair<std::string, gguf::Value>> set;  // keys added or replaced
    std::string drop_prefix;                              // every tensor whose name starts so ("" none)
    std::string cut;                                      // a tensor kept as its first cut_values F32 values, 1-D
    int64_t cut_values = 0;
};

// A copy of the file `from` at `to`, edited.
inline void rewrite(const std::string& from, const std::string& to, const Edit& e) {
    const auto dropped = [&](const std::string& name) {
        for (const std::string& d : e.drop)
            if (d == name) return true;
        return false;
    };
    auto in = gguf::File::open(from);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata())
        if (!dropped(key)) w.set(key, value);
    for (const auto& [key, value] : e.set) w.set(key, value);
    for (const auto& t : in->tensors()) {
        if (dropped(t.name) || (!e.drop_prefix.empty() && t.name.rfind(e.drop_prefix, 0) == 0)) continue;
        if (!e.cut.empty() && t.name == e.cut) {
            w.add_tensor(t.name, t.type, {e.cut_values}, t.data, size_t(e.cut_values) * 4);
        } else {
            w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        }
    }
    w.write(to);
}

// A copy of `from` without the key or tensor `name`.
inline void without(const std::string& from, const std::string& to, const std::string& name) {
    rewrite(from, to, {.drop = {name}});
}

// The error opening the model at `path` gives on the CPU backend, or "" when it loads.
inline std::string load_error(const std::string& path) {
    try {
        open_step_model(path, {.threads = 1, .tokens_wanted = 8});
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace pagoda::model::gguf_edit
