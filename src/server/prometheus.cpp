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

std::string MetricRegistry::render() const {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& fp : families_) {
        const Family& f = *fp;
        const char* type = f.type == MetricType::counter ? "counter" : f.type == MetricType::gauge ? "gauge" : "histogram";
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, escape_help(f.help), f.name, type);
        // A family without labels always shows a sample (0 before the first event).
        if (f.series.empty() && f.label_names.empty()) {
            if (f.type == MetricType::histogram) {
                for (double b : f.bounds) out += fmt::format("{}_bucket{{le=\"{}\"}} 0\n", f.name, format_metric_value(b));
                out += fmt::format("{}_bucket{{le=\"+Inf\"}} 0\n{}_sum 0\n{}_count 0\n", f.name, f.name, f.name);
            } else {
                out += fmt::format("{} 0\n", f.name);
            }
            continue;
        }
        for (const auto& [labels, s] : f.series) {
            if (f.type != MetricType::histogram) {
                out += fmt::format("{}{} {}\n", f.name, label_text(f.label_names, labels), format_metric_value(s.value));
                continue;
            }
            uint64_t cumulative = 0;
            for (size_t i = 0; i < f.bounds.size(); ++i) {
                cumulative += s.buckets.empty() ? 0 : s.buckets[i];
                out += fmt::format("{}_bucket{} {}\n", f.name,
                                   label_text(f.label_names, labels, "le", format_metric_value(f.bounds[i])), cumulative);
            }
            out += fmt::format("{}_bucket{} {}\n", f.name, label_text(f.label_names, labels, "le", "+Inf"), s.count);
            out += fmt::format("{}_sum{} {}\n", f.name, label_text(f.label_names, labels), format_metric_value(s.sum));
            out += fmt::format("{}_count{} {}\n", f.name, label_text(f.label_names, labels), s.count);
        }
    }
    return out;
}

}  // namespace pagoda::server
