// `pagoda quantize IN.gguf OUT.gguf TYPE [--calib TEXT | --imatrix FILE]`: post-training weight quantisation.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/progress.h"
#include "apps/text_file.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "model/calibration.h"
#include "model/open_step_model.h"
#include "model/model_file.h"
#include "quant/imatrix_file.h"
#include "quant/quantize_model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

struct QuantizeOptions {
    std::string input, output, type, calib, imatrix, token_embedding_type, output_tensor_type;
    int64_t calib_tokens = 8192, calib_ctx = 512;
    int threads = 0;
    bool plain = false, allow_requantize = false;
};

// llama-quantize's spellings of our types: any case, and the _S names of the plain K mixes.
std::string canonical_type(std::string name) {
    for (auto& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (name == "q4_k_s") return "q4_k";
    if (name == "q3_k_s") return "q3_k";
    if (name == "q5_k_s") return "q5_k";
    if (name == "mxfp4_moe") return "mxfp4";
    for (const char* grid : {"iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m", "iq1_s", "iq1_m"})
        if (name == grid)
            throw CLI::ValidationError("type", "quantising to " + name + " is not supported (files holding the IQ1/IQ2/IQ3 "
                                               "types load and run; pagoda quantises to iq4_nl, iq4_xs and mxfp4)");
    return name;
}

// Quantising quantised weights compounds two rounding errors: refuse unless asked, as
// llama-quantize does.
void check_not_quantised(const std::string& path, bool allowed) {
    if (allowed) return;
    std::shared_ptr<const gguf::File> file = model::open_model_file(path);
    int quantised = 0;
    std::string example;
    for (const auto& t : file->tensors()) {
        if (t.shape.size() < 2 || t.type == gguf::GgmlType::F32 || t.type == gguf::GgmlType::F16 ||
            t.type == gguf::GgmlType::BF16) continue;
        if (quantised++ == 0) example = fmt::format("{} is {}", t.name, gguf::type_name(uint32_t(t.type)));
    }
    if (quantised > 0)
        fail("'{}' is already quantised ({} weight matrices, e.g. {}): quantise the F32/F16/BF16 original, or pass "
             "--allow-requantize to accept the compounded error",
             path, quantised, example);
}

// Where quantisation is: on a terminal a bar naming the tensor just done; in a log one line per
// tensor group (a layer "blk.N", or a tensor outside the layers) as each group completes.
class QuantizeProgress {
public:
    void add(size_t done, size_t total, const quant::TensorReport& t) {
        if (!bar_) bar_.emplace("tensors", total);
        if (bar_->terminal()) {
            bar_->update(done, t.name);
            return;
        }
        const std::string group = group_of(t.name);
        if (group != group_) {
            if (count_ > 0) report(done - 1);
            group_ = group;
            count_ = 0;
            in_ = out_ = 0;
        }
        ++count_;
        in_ += t.bytes_in;
        out_ += t.bytes_out;
        if (done == total) report(done);
    }
    void finish() {
        if (bar_) bar_->finish();
    }

private:
    static std::string group_of(const std::string& name) {
        if (name.rfind("blk.", 0) != 0) return name;
        const size_t dot = name.find('.', 4);
        return dot == std::string::npos ? name : name.substr(0, dot);
    }
    void report(size_t done) {
        bar_->line(done, fmt::format("{} ({} tensor{}, {:.2f} MiB -> {:.2f} MiB)", group_, count_, count_ == 1 ? "" : "s",
                                     double(in_) / 1048576.0, double(out_) / 1048576.0));
    }

    std::optional<Progress> bar_;
    std::string group_;
    int count_ = 0;
    uint64_t in_ = 0, out_ = 0;
};

// One table row per group of tensors; the label column is as wide as the longest label.
struct Group {
    int count = 0, quantised = 0;
    uint64_t in = 0, out = 0;
    double err = 0;
};

void print_groups(const std::map<std::string, Group>& groups) {
    const std::string title = "tensors (from -> to, rule)";
    size_t width = title.size();
    for (const auto& [label, g] : groups) width = std::max(width, label.size());
    std::printf("%-*s %7s %12s %12s %10s\n", int(width), title.c_str(), "count", "MiB in", "MiB out", "rel. error");
    for (const auto& [label, g] : groups) {
        const std::string err = g.quantised ? fmt::format("{:.5f}", g.err / g.quantised) : "-";
        std::printf("%-*s %7d %12.2f %12.2f %10s\n", int(width), label.c_str(), g.count, double(g.in) / 1048576.0,
                    double(g.out) / 1048576.0, err.c_str());
    }
}

int run_quantize(const QuantizeOptions& o) {
    quant::QuantizeRequest req;
    req.input = o.input;
    req.output = o.output;
    req.target = o.type;
    req.plain = o.plain;
    req.token_embedding_type = o.token_embedding_type;
    req.output_tensor_type = o.output_tensor_type;
    if (o.plain && !quant::target_has_clipping_search(o.type))
        fail("--plain-minmax: {} has no clipping search to turn off (its quantiser searches its block scales as "
             "ggml's does); q8_0, q4_0, int8, int4-g32 and int4-g128 have one",
             o.type);
    if (o.plain && !o.calib.empty()) fail("--plain-minmax and --calib exclude each other");
    if (o.plain && !o.imatrix.empty()) fail("--plain-minmax and --imatrix exclude each other");
    if (!o.calib.empty() && !o.imatrix.empty()) fail("--calib and --imatrix exclude each other (both give the importance)");
    check_not_quantised(o.input, o.allow_requantize);
    const auto start = std::chrono::steady_clock::now();
    const int threads = o.threads > 0 ? o.threads : default_thread_count();

    if (!o.calib.empty()) {
        const std::string text = read_text_file(o.calib, "calibration text");
        std::shared_ptr<const gguf::File> file = model::open_model_file(o.input, {.quantize = {}, .threads = 0, .tokenizer = true});
        auto tok = tokenizer::Tokenizer::from_gguf(*file);
        auto model = model::open_step_model(file, {.threads = threads, .kv = {.prefix_caching = false},
                                                   .tokens_wanted = o.calib_ctx + 1, .max_step_tokens = 512});
        auto ids = tok->encode(text, {.add_bos = false, .add_eos = false});
        std::fprintf(stderr, "pagoda quantize: calibrating on %lld of %zu tokens of %s\n",
                     (long long)std::min<int64_t>(int64_t(ids.size()), o.calib_tokens), ids.size(), o.calib.c_str());
        req.importance = model::collect_activation_importance(*model, ids, tok->bos(), o.calib_ctx, o.calib_tokens);
        // A small floor keeps columns the calibration text never exercised from being ignored entirely.
        for (auto& [name, w] : req.importance) {
            double mean = 0;
            for (float v : w) mean += v;
            mean /= double(std::max<size_t>(1, w.size()));
            for (float& v : w) v += float(0.01 * mean);
        }
    }
    if (!o.imatrix.empty()) {
        req.importance = quant::read_imatrix_file(o.imatrix);
        std::shared_ptr<const gguf::File> file = model::open_model_file(o.input);
        size_t matched = 0;
        for (const auto& [name, w] : req.importance) {
            const gguf::TensorInfo* t = file->find_tensor(name);
            if (!t) continue;
            ++matched;
            if (t->shape.empty() || t->shape[0] != int64_t(w.size()))
                fail("imatrix {}: {} has {} columns, the model's tensor has {}", o.imatrix, name, w.size(),
                     t->shape.empty() ? 0 : t->shape[0]);
        }
        if (matched == 0) fail("imatrix {}: none of its {} entries names a tensor of {}", o.imatrix, req.importance.size(), o.input);
        std::fprintf(stderr, "pagoda quantize: importance of %zu tensors from %s\n", matched, o.imatrix.c_str());
    }
    QuantizeProgress progress;
    req.progress = [&progress](size_t done, size_t total, const quant::TensorReport& t) { progress.add(done, total, t); };

    ThreadPool pool(threads);
    quant::QuantizeReport report = quant::quantize_model(req, pool);
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::map<std::string, Group> groups;  // "from -> to (rule)"
    for (const auto& t : report.tensors) {
        Group& g = groups[fmt::format("{:>5} -> {:<9} {}", t.from_type, t.to_type, t.rule)];
        ++g.count;
        g.in += t.bytes_in;
        g.out += t.bytes_out;
        if (t.from_type != t.to_type) { g.err += t.relative_error; ++g.quantised; }
    }
    std::printf("pagoda quantize: %s -> %s (%s%s) in %.1f s\n", o.input.c_str(), o.output.c_str(), o.type.c_str(),
                o.calib.empty() ? (o.imatrix.empty() ? "" : ", imatrix") : ", calibrated", seconds);
    print_groups(groups);
    std::printf("total: %.2f MiB -> %.2f MiB (%.1f %%)\n", double(report.bytes_in) / 1048576.0,
                double(report.bytes_out) / 1048576.0, 100.0 * double(report.bytes_out) / double(report.bytes_in));
    return 0;
}

CommandRegistration reg("quantize", "Quantise a model's weights (post-training, optionally calibrated)", [](CLI::App& sub) {
    auto o = std::make_shared<QuantizeOptions>();
    sub.add_option("input", o->input, "Input GGUF or Hugging Face model folder (F32, F16 or BF16; a quantised one with --allow-requantize)")->required();
    sub.add_option("output", o->output, "Output GGUF")->required();
    sub.add_option("type", o->type,
                   "q8_0, q4_0, q5_0, q5_1, q2_k, q3_k, q3_k_m, q4_k, q4_k_m, q5_k, q5_k_m, q6_k, iq4_nl, iq4_xs, mxfp4, "
                   "int8, int4-g32, int4-g128; any case, and llama-quantize's Q3_K_S / Q4_K_S / Q5_K_S for q3_k / "
                   "q4_k / q5_k and MXFP4_MOE for mxfp4 (here every weight matrix, not only the experts). IQ4_NL, "
                   "IQ4_XS and MXFP4 search their scales weighted by importance (--calib or --imatrix); IQ4_XS rows "
                   "not a multiple of 256 fall back to IQ4_NL. Quantising to the grid types IQ1_*, IQ2_*, IQ3_* is "
                   "refused (files holding them load and run). The "
                   "_m mixes give some layer tensors more bits, as llama-quantize does: q4_k_m and q5_k_m attn_v and "
                   "ffn_down of the first and last eighth of the layers and every third between Q6_K; q3_k_m attn_v "
                   "Q5_K in layers 0-1 else Q4_K, ffn_down Q5_K in the first sixteenth else Q4_K, attn_output Q4_K")
        ->required()
        ->transform(canonical_type)
        ->check(CLI::IsMember(quant::quantize_target_names()));
    sub.add_option("--calib", o->calib, "Calibration text: weight the scale search by activation statistics");
    sub.add_option("--imatrix", o->imatrix,
                   "llama.cpp importance matrix (GGUF from llama-imatrix: NAME.in_sum2 / NAME.counts per weight) "
                   "weighting the scale search instead of --calib");
    sub.add_option("--calib-tokens", o->calib_tokens, "Calibration tokens to use at most")->check(in_range(1, 1 << 24));
    sub.add_option("--calib-ctx", o->calib_ctx, "Calibration window length")->check(in_range(2, 1 << 16));
    sub.add_option("--token-embedding-type", o->token_embedding_type,
                   "Quantise the token embedding to this type too (empty: kept as it is, unlike llama-quantize: only "
                   "one row per token is read, so quantising it gains no speed and costs accuracy; kept at F16 it is "
                   "about 3.5 times its Q4_0 size, e.g. 125 MiB instead of 35 MiB for a 32000 x 2048 embedding; q4_0 "
                   "gives llama-quantize's Q4_0 layout)")
        ->transform(canonical_type)
        ->check(CLI::IsMember(quant::quantize_target_names()));
    sub.add_option("--output-tensor-type", o->output_tensor_type, "Type of the output head (default: q8_0 for q8_0 and int8, else q6_k)")
        ->transform(canonical_type)
        ->check(CLI::IsMember(quant::quantize_target_names()));
    sub.add_flag("--allow-requantize", o->allow_requantize, "Quantise an input that is already quantised");
    sub.add_flag("--plain-minmax", o->plain, "No clipping search: plain min/max scales, for comparison (q8_0, q4_0, int8, int4-g32, int4-g128: the other types' quantisers search their own scales, as ggml's do, and refuse it)");
    add_threads_option(sub, o->threads);
    return [o] { return run_quantize(*o); };
});

}  // namespace
}  // namespace pagoda::app
