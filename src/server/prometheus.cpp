#include "server/prometheus.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::server {

std::string escape_label_value(const std::string& value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string format_metric_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
    return fmt::format("{}", v);  // shortest round-trip representation
}

void MetricRegistry::add(Family f) {
    std::lock_guard lock(mutex_);
    if (by_name_.count(f.name)) fail("metric '{}' is registered twice", f.name);
    families_.push_back(std::make_unique<Family>(std::move(f)));
    by_name_[families_.back()->name] = families_.back().get();
}

void MetricRegistry::add_counter(const std::string& name, const std::string& help, std::vector<std::string> labels) {
    add(Family{name, help, MetricType::counter, std::move(labels), {}, {}});
}
void MetricRegistry::add_gauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
    add(Family{name, help, MetricType::gauge, std::move(labels), {}, {}});
}
void MetricRegistry::add_histogram(const std::string& name, const std::string& help, std::vector<double> buckets,
                                   std::vector<std::string> labels) {
    for (size_t i = 1; i < buckets.size(); ++i)
        if (!(buckets[i] > buckets[i - 1])) fail("histogram '{}': buckets must increase", name);
    add(Family{name, help, MetricType::histogram, std::move(labels), std::move(buckets), {}});
}

MetricRegistry::Family& MetricRegistry::family(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) fail("metric '{}' is not registered", name);
    return *it->second;
}
const MetricRegistry::Family& MetricRegistry::family(const std::string& name) const {
    return const_cast<MetricRegistry*>(this)->family(name);
}

static void check_labels(const std::string& name, size_t want, size_t got) {
    if (want != got) fail("metric '{}' takes {} labels, got {}", name, want, got);
}

void MetricRegistry::inc(const std::string& name, const Labels& labels, double by) {
    std::lock_guard lock(mutex_);
    Family& f = family(name);
    check_labels(name, f.label_names.size(), labels.size());
    f.series[labels].value += by;
}

void MetricRegistry::set(const std::string& name, double value, const Labels& labels) {
    std::lock_guard lock(mutex_);
    Family& f = family(name);
    check_labels(name, f.label_names.size(), labels.size());
    f.series[labels].value = value;
}

void MetricRegistry::set_only(const std::string& name, double value, const Labels& labels) {
    std::lock_guard lock(mutex_);
    Family& f = family(name);
    check_labels(name, f.label_names.size(), labels.size());
    f.series.clear();
    f.series[labels].value = value;
}

void MetricRegistry::observe(const std::string& name, double value, const Labels& labels) {
    std::lock_guard lock(mutex_);
    Family& f = family(name);
    check_labels(name, f.label_names.size(), labels.size());
    Series& s = f.series[labels];
    if (s.buckets.empty()) s.buckets.assign(f.bounds.size() + 1, 0);
    size_t i = std::lower_bound(f.bounds.begin(), f.bounds.end(), value) - f.bounds.begin();  // le: value <= bound
    ++s.buckets[i];
    s.sum += value;
    ++s.count;
}

double MetricRegistry::value(const std::string& name, const Labels& labels) const {
    std::lock_guard lock(mutex_);
    const Family& f = family(name);
    auto it = f.series.find(labels);
    return it == f.series.end() ? 0.0 : it->second.value;
}

uint64_t MetricRegistry::count(const std::string& name, const Labels& labels) const {
    std::lock_guard lock(mutex_);
    const Family& f = family(name);
    auto it = f.series.find(labels);
    return it == f.series.end() ? 0 : it->second.count;
}

namespace {

std::string label_text(const std::vector<std::string>& names, const std::vector<std::string>& values,
                       const std::string& extra_name = {}, const std::string& extra_value = {}) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
        out += out.empty() ? "{" : ",";
        out += names[i] + "=\"" + escape_label_value(values[i]) + "\"";
    }
    if (!extra_name.empty()) {
        out += out.empty() ? "{" : ",";
        out += extra_name + "=\"" + extra_value + "\"";
    }
    if (!out.empty()) out += "}";
    return out;
}

std::string escape_help(const std::string& help) {
    std::string out;
    for (char c : help) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

}  // namespace

void MetricRegistry::add_alias(const std::string& name, const std::string& alias,
                               std::vector<std::pair<std::string, std::string>> constant_labels) {
    std::lock_guard lock(mutex_);
    const Family& f = family(name);
    if (by_name_.count(alias) || std::any_of(aliases_.begin(), aliases_.end(), [&](const Alias& a) { return a.name == alias; }))
        fail("metric '{}' is already registered", alias);
    Alias a{&f, alias, {}, {}};
    for (auto& [label, value] : constant_labels) {
        a.label_names.push_back(std::move(label));
        a.label_values.push_back(std::move(value));
    }
    aliases_.push_back(std::move(a));
}

void MetricRegistry::render_family(std::string& out, const Family& f, const std::string& name, const Alias* alias) const {
    const char* type = f.type == MetricType::counter ? "counter" : f.type == MetricType::gauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(f.help), name, type);
    std::vector<std::string> names = alias ? alias->label_names : std::vector<std::string>{};
    names.insert(names.end(), f.label_names.begin(), f.label_names.end());
    auto labels_of = [&](const Labels& own) {
        Labels values = alias ? alias->label_values : Labels{};
        values.insert(values.end(), own.begin(), own.end());
        return values;
    };
    auto render_series = [&](const Labels& values, const Series& s) {
        if (f.type != MetricType::histogram) {
            out += fmt::format("{}{} {}\n", name, label_text(names, values), format_metric_value(s.value));
            return;
        }
        uint64_t cumulative = 0;
        for (size_t i = 0; i < f.bounds.size(); ++i) {
            cumulative += s.buckets.empty() ? 0 : s.buckets[i];
            out += fmt::format("{}_bucket{} {}\n", name, label_text(names, values, "le", format_metric_value(f.bounds[i])),
                               cumulative);
        }
        out += fmt::format("{}_bucket{} {}\n", name, label_text(names, values, "le", "+Inf"), s.count);
        out += fmt::format("{}_sum{} {}\n", name, label_text(names, values), format_metric_value(s.sum));
        out += fmt::format("{}_count{} {}\n", name, label_text(names, values), s.count);
    };
    // A family without labels of its own always shows a sample (0 before the first event).
    if (f.series.empty() && f.label_names.empty()) render_series(labels_of({}), Series{});
    for (const auto& [labels, s] : f.series) render_series(labels_of(labels), s);
}

void MetricRegistry::set_constant_labels(std::vector<std::pair<std::string, std::string>> labels) {
    std::lock_guard lock(mutex_);
    constant_names_.clear();
    constant_values_.clear();
    for (auto& [name, value] : labels) {
        constant_names_.push_back(std::move(name));
        constant_values_.push_back(std::move(value));
    }
}

std::string MetricRegistry::render() const {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& f : families_) {
        if (constant_names_.empty()) {
            render_family(out, *f, f->name, nullptr);
        } else {
            const Alias self{f.get(), f->name, constant_names_, constant_values_};
            render_family(out, *f, f->name, &self);
        }
    }
    for (const auto& a : aliases_) render_family(out, *a.family, a.name, &a);
    return out;
}

}  // namespace pagoda::server
