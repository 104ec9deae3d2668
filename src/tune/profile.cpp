#include "tune/profile.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace pagoda::tune {

using nlohmann::json;

namespace {

// Reads one JSON object strictly: every key must be known, every value of the expected kind (the
// kind checked by core/json_reader, the one strict reader; errors read "WHERE: key 'PATH' ...").
class Reader {
    // (defined first: the members below deduce their return types from them)
    // The member `key` (which must be there) through `get(value, path)`.
    template <class Get>
    decltype(auto) read(const std::string& key, Get get) {
        seen_.insert(key);
        auto it = j_.find(key);
        if (it == j_.end()) fail("{}: key '{}' is missing", where_, name(key));
        return checked(name(key), [&](const std::string& p) -> decltype(auto) { return get(*it, p); });
    }
    template <class Run>
    decltype(auto) checked(const std::string& path, Run run) const {
        try {
            return run(path);
        } catch (const json_reader::JsonFieldError& e) {
            fail("{}: key {}", where_, e.what());
        }
    }

public:
    Reader(const json& j, std::string path, const std::string& where) : j_(j), path_(std::move(path)), where_(where) {
        checked(path_.empty() ? "(top level)" : path_, [&](const std::string& p) { json_reader::read_object(j_, p); });
    }
    ~Reader() noexcept(false) = default;

    bool has(const std::string& key) const { return j_.contains(key); }
    std::string str(const std::string& key) {
        return read(key, [](const json& v, const std::string& p) { return json_reader::read_string(v, p); });
    }
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) {
        const int64_t x = read(key, [](const json& v, const std::string& p) { return json_reader::read_integer(v, p); });
        if (x < lo || x > hi) out_of_range(key, lo, hi);
        return x;
    }
    double number(const std::string& key, double lo, double hi) {
        const double x = read(key, [](const json& v, const std::string& p) { return json_reader::read_number(v, p); });
        if (!(x >= lo && x <= hi)) fail("{}: key '{}' is {}: use {} to {}", where_, name(key), x, lo, hi);
        return x;
    }
    bool boolean(const std::string& key) {
        return read(key, [](const json& v, const std::string& p) { return json_reader::read_bool(v, p); });
    }
    const json& array(const std::string& key) {
        return read(key, [](const json& v, const std::string& p) -> const json& { return json_reader::read_array(v, p); });
    }
    const json& object(const std::string& key) {
        return read(key, [](const json& v, const std::string& p) -> const json& { return json_reader::read_object(v, p); });
    }
    std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
    // After reading: any key not read is unknown.
    void done() const {
        for (auto it = j_.begin(); it != j_.end(); ++it)
            if (!seen_.count(it.key())) fail("{}: key '{}' is not a profile key", where_, name(it.key()));
    }
    void out_of_range(const std::string& key, int64_t lo, int64_t hi) const {
        fail("{}: key '{}' is {}: use {} to {}", where_, name(key), j_.at(key).dump(), lo, hi);
    }

private:
    const json& j_;
    std::string path_;
    const std::string& where_;
    std::set<std::string> seen_;
};

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

backend::cpu::KernelPlan read_plan(const json& arr, const std::string& where) {
    backend::cpu::KernelPlan plan;
    for (size_t i = 0; i < arr.size(); ++i) {
        Reader r(arr[i], fmt::format("kernel_plan[{}]", i), where);
        backend::cpu::TypePlan t;
        const std::string type = r.str("type");
        const auto parsed = gguf::type_from_name(type);
        if (!parsed || (!backend::cpu::method_applies(backend::cpu::PathMethod::int8_dot, *parsed) &&
                        !backend::cpu::method_applies(backend::cpu::PathMethod::f32_fma, *parsed)))
            fail("{}: key '{}' is '{}', not a weight type pagoda multiplies (f32, f16, bf16, q8_0, q4_0, q4_K, ...)", where,
                 r.name("type"), type);
        t.type = *parsed;
        const std::string method = r.str("method");
        const auto m = backend::cpu::parse_path_method(method);
        if (!m)
            fail("{}: key '{}' is '{}', not one of f32_fma, bf16_dot, int8_dot, dequant_fma, amx_bf16", where,
                 r.name("method"), method);
        if (!backend::cpu::method_applies(*m, t.type))
            fail("{}: key '{}': {} cannot multiply {} weights", where, r.name("method"), method, type);
        t.method = *m;
        const json& ranges = r.array("ranges");
        if (ranges.empty()) fail("{}: key '{}' is empty: give at least one range", where, r.name("ranges"));
        int64_t prev = 0;
        for (size_t k = 0; k < ranges.size(); ++k) {
            Reader rr(ranges[k], r.name(fmt::format("ranges[{}]", k)), where);
            backend::cpu::RangeTiles range;
            const bool last = k + 1 == ranges.size();
            if (last && rr.has("max_tokens"))
                fail("{}: key '{}' must be absent: the last range covers every larger step", where, rr.name("max_tokens"));
            if (!last) {
                range.max_tokens = rr.integer("max_tokens", 1, int64_t(1) << 30);
                if (range.max_tokens <= prev)
                    fail("{}: key '{}' is {}: the ranges' max_tokens must increase", where, rr.name("max_tokens"),
                         range.max_tokens);
                prev = range.max_tokens;
            }
            range.tiles.kc = rr.integer("kc", 1, 1 << 20);
            range.tiles.mc = rr.integer("mc", 1, 1 << 20);
            range.tiles.nc = rr.integer("nc", 1, 1 << 20);
            rr.done();
            t.ranges.push_back(range);
        }
        if (r.has("amx_min_tokens")) {
            t.amx_min_tokens = r.integer("amx_min_tokens", 1, backend::cpu::kNeverMinTokens);
            if (!backend::cpu::amx_applies(t.method, t.type))
                fail("{}: key '{}': AMX tiles run only int8_dot on q4_0, q4_1, q5_0, q8_0, q4_K, q5_K, q6_K (not {} {})", where,
                     r.name("amx_min_tokens"), type, method);
        }
        if (r.has("wide_min_tokens")) {
            t.wide_min_tokens = r.integer("wide_min_tokens", backend::cpu::kDefaultWideMinTokens, backend::cpu::kNeverMinTokens);
            if (!backend::cpu::amx_applies(t.method, t.type))
                fail("{}: key '{}': the wide prefill kernel runs only int8_dot on q4_0, q4_1, q5_0, q8_0, q4_K, q5_K, q6_K (not {} {})",
                     where, r.name("wide_min_tokens"), type, method);
        }
        r.done();
        if (plan.find(t.type)) fail("{}: key '{}': weight type {} is listed twice", where, r.name("type"), type);
        plan.types.push_back(std::move(t));
    }
    return plan;
}

}  // namespace

json profile_to_json(const Profile& p) {
    json plan = json::array();
    for (const auto& t : p.plan.types) {
        json ranges = json::array();
        for (const auto& r : t.ranges) {
            json jr = {{"kc", r.tiles.kc}, {"mc", r.tiles.mc}, {"nc", r.tiles.nc}};
            if (r.max_tokens != INT64_MAX) jr["max_tokens"] = r.max_tokens;
            ranges.push_back(jr);
        }
        json jt = {{"type", gguf::type_name(uint32_t(t.type))},
                   {"method", backend::cpu::path_method_name(t.method)},
                   {"ranges", ranges}};
        if (t.amx_min_tokens) jt["amx_min_tokens"] = *t.amx_min_tokens;
        if (t.wide_min_tokens) jt["wide_min_tokens"] = *t.wide_min_tokens;
        plan.push_back(jt);
    }
    json j = {
        {"format", "pagoda-profile"},
        {"version", kProfileVersion},
        {"machine",
         {{"cpu_model", p.machine.cpu_model},
          {"vendor", p.machine.vendor},
          {"family", p.machine.family},
          {"model", p.machine.model},
          {"stepping", p.machine.stepping},
          {"isa_flags", p.machine.isa_flags},
          {"cores", p.machine.cores}}},
        {"model", {{"path", p.model_path}, {"identity", hex64(p.model_identity)}}},
        {"kernel_plan", plan},
        {"threads", p.threads},
        {"kv_block_size", p.kv_block_size},
        {"scheduler",
         {{"max_batched_tokens", p.scheduler.max_batched_tokens},
          {"max_seqs", p.scheduler.max_seqs},
          {"target_itl_ms", p.scheduler.target_itl_ms},
          {"modelled_p99_itl_ms", p.scheduler.modelled_p99_itl_ms},
          {"modelled_output_tokens_per_s", p.scheduler.modelled_tokens_per_s},
          {"target_met", p.scheduler.target_met}}},
        {"measurements", p.measurements},
    };
    if (p.plan.attention) j["attention"] = backend::cpu::attention_method_name(*p.plan.attention);
    if (p.plan.decode_kv_prefetch) j["decode_kv_prefetch"] = *p.plan.decode_kv_prefetch;
    if (p.plan.weight_prefetch) j["weight_prefetch"] = backend::cpu::weight_prefetch_name(*p.plan.weight_prefetch);
    return j;
}

Profile parse_profile(const std::string& text, const std::string& where) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        fail("{}: not valid JSON ({})", where, e.what());
    }
    Reader top(j, "", where);
    if (const std::string f = top.str("format"); f != "pagoda-profile")
        fail("{}: key 'format' is '{}', not 'pagoda-profile'", where, f);
    const int64_t version = top.integer("version", INT64_MIN, INT64_MAX);
    if (version != kProfileVersion)
        fail("{}: key 'version' is {}: this build reads profile version {} (run `pagoda tune` again)", where, version,
             kProfileVersion);
    Profile p;
    {
        Reader m(top.object("machine"), "machine", where);
        p.machine.cpu_model = m.str("cpu_model");
        p.machine.vendor = m.str("vendor");
        p.machine.family = int(m.integer("family", 0, 1 << 16));
        p.machine.model = int(m.integer("model", 0, 1 << 16));
        p.machine.stepping = int(m.integer("stepping", 0, 1 << 16));
        const json& flags = m.array("isa_flags");
        for (size_t i = 0; i < flags.size(); ++i) {
            if (!flags[i].is_string()) fail("{}: key 'machine.isa_flags[{}]' must be a string", where, i);
            p.machine.isa_flags.push_back(flags[i].get<std::string>());
        }
        std::sort(p.machine.isa_flags.begin(), p.machine.isa_flags.end());
        p.machine.cores = int(m.integer("cores", 1, 1 << 16));
        m.done();
    }
    {
        Reader m(top.object("model"), "model", where);
        p.model_path = m.str("path");
        const std::string id = m.str("identity");
        if (id.size() != 16 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
            fail("{}: key 'model.identity' is '{}', not 16 lowercase hex digits", where, id);
        p.model_identity = std::stoull(id, nullptr, 16);
        m.done();
    }
    p.plan = read_plan(top.array("kernel_plan"), where);
    if (top.has("attention")) {
        const std::string name = top.str("attention");
        p.plan.attention = backend::cpu::parse_attention_method(name);
        if (!p.plan.attention) {
            std::vector<std::string> names;
            for (auto m : backend::cpu::kAttentionMethods) names.push_back(backend::cpu::attention_method_name(m));
            fail("{}: key 'attention' is '{}', not one of {}", where, name, fmt::join(names, ", "));
        }
    }
    if (top.has("decode_kv_prefetch")) p.plan.decode_kv_prefetch = top.boolean("decode_kv_prefetch");
    if (top.has("weight_prefetch")) {
        const std::string name = top.str("weight_prefetch");
        p.plan.weight_prefetch = backend::cpu::parse_weight_prefetch(name);
        if (!p.plan.weight_prefetch) fail("{}: key 'weight_prefetch' is '{}', not one of l1, l2", where, name);
    }
    p.threads = int(top.integer("threads", 1, 1024));
    p.kv_block_size = int32_t(top.integer("kv_block_size", 1, 256));
    if ((p.kv_block_size & (p.kv_block_size - 1)) != 0)
        fail("{}: key 'kv_block_size' is {}: use a power of two", where, p.kv_block_size);
    {
        Reader s(top.object("scheduler"), "scheduler", where);
        p.scheduler.max_batched_tokens = s.integer("max_batched_tokens", 1, 1 << 20);
        p.scheduler.max_seqs = int32_t(s.integer("max_seqs", 1, 4096));
        p.scheduler.target_itl_ms = s.number("target_itl_ms", 0.001, 1e9);
        p.scheduler.modelled_p99_itl_ms = s.number("modelled_p99_itl_ms", 0, 1e12);
        p.scheduler.modelled_tokens_per_s = s.number("modelled_output_tokens_per_s", 0, 1e12);
        p.scheduler.target_met = s.boolean("target_met");
        s.done();
    }
    p.measurements = top.object("measurements");
    top.done();
    return p;
}

Profile read_profile_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("profile {}: cannot be read (no such file, or no permission)", path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_profile(ss.str(), "profile " + path);
}

void write_profile_file(const Profile& p, const std::string& path) {
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail("profile {}: cannot be written (does the directory exist and is it writable?)", path);
        out << profile_to_json(p).dump(2) << "\n";
        if (!out.flush()) fail("profile {}: writing failed (disk full?)", path);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        fail("profile {}: cannot be written (rename failed)", path);
    }
}

std::string describe_profile(const Profile& p) {
    std::string out = fmt::format("machine: {} ({} cores)\n", p.machine.cpu_model, p.machine.cores);
    for (const auto& t : p.plan.types) {
        std::string ranges;
        int64_t lo = 1;
        for (const auto& r : t.ranges) {
            const std::string span = backend::cpu::token_range_label(lo, r.max_tokens);
            ranges += fmt::format(" [{} tokens: kc {} mc {} nc {}]", span, r.tiles.kc, r.tiles.mc, r.tiles.nc);
            if (r.max_tokens != INT64_MAX) lo = r.max_tokens + 1;
        }
        if (t.amx_min_tokens) ranges += fmt::format(" [AMX tiles from {} tokens]", *t.amx_min_tokens);
        if (t.wide_min_tokens)
            ranges += *t.wide_min_tokens >= backend::cpu::kNeverMinTokens
                          ? std::string(" [wide prefill kernel: never]")
                          : fmt::format(" [wide prefill kernel from {} tokens]", *t.wide_min_tokens);
        out += fmt::format("  {:<6} {:<11}{}\n", gguf::type_name(uint32_t(t.type)), backend::cpu::path_method_name(t.method), ranges);
    }
    out += p.plan.attention ? fmt::format("  attention {}\n", backend::cpu::attention_method_name(*p.plan.attention))
                            : std::string("  attention simd (not measured)\n");
    out += p.plan.decode_kv_prefetch ? fmt::format("  decode KV prefetch {}\n", *p.plan.decode_kv_prefetch ? "on" : "off")
                                     : std::string("  decode KV prefetch off (not measured)\n");
    out += p.plan.weight_prefetch
               ? fmt::format("  decode weight prefetch {}\n", backend::cpu::weight_prefetch_name(*p.plan.weight_prefetch))
               : std::string("  decode weight prefetch l2 (not measured)\n");
    out += fmt::format("threads {}, KV block size {}, --max-batched-tokens {} --max-seqs {}: modelled p99 inter-token latency "
                       "{:.1f} ms (target {:.0f} ms, {}), {:.1f} output tokens/s\n",
                       p.threads, p.kv_block_size, p.scheduler.max_batched_tokens, p.scheduler.max_seqs,
                       p.scheduler.modelled_p99_itl_ms, p.scheduler.target_itl_ms, p.scheduler.target_met ? "met" : "NOT met",
                       p.scheduler.modelled_tokens_per_s);
    return out;
}

void require_same_machine(const Profile& p, const MachineIdentity& here, const std::string& where) {
    const auto diff = differences(p.machine, here);
    if (diff.empty()) return;
    fail("{} was measured on another machine ({}); run `pagoda tune` on this one", where, fmt::join(diff, "; "));
}

}  // namespace pagoda::tune
