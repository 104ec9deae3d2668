// A small Prometheus registry and text exposition (format 0.0.4): counter, gauge and histogram
// families with labels, rendered with # HELP / # TYPE lines, escaped label values, cumulative
// histogram buckets ending in +Inf, _sum and _count. Thread-safe: series may be updated from the
// engine thread while a scrape renders. Families render in registration order, series in label order;
// a family's aliases (the same series under another name, with constant labels added in front)
// render after all families.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::server {

enum class MetricType { counter, gauge, histogram };

class MetricRegistry {
public:
    using Labels = std::vector<std::string>;  // values, in the family's label-name order

    // Declares a family (names must be unique; histogram buckets strictly increasing).
    void add_counter(const std::string& name, const std::string& help, std::vector<std::string> label_names = {});
    void add_gauge(const std::string& name, const std::string& help, std::vector<std::string> label_names = {});
    void add_histogram(const std::string& name, const std::string& help, std::vector<double> buckets,
                       std::vector<std::string> label_names = {});
    // Renders family `name` a second time as `alias` (a name not otherwise registered), each
    // sample carrying `constant_labels` (name, value) before its own labels.
    void add_alias(const std::string& name, const std::string& alias,
                   std::vector<std::pair<std::string, std::string>> constant_labels = {});

    // Labels (name, value) every family's samples carry first, e.g. model_name; aliases carry only
    // their own constant labels.
    void set_constant_labels(std::vector<std::pair<std::string, std::string>> labels);

    void inc(const std::string& name, const Labels& labels = {}, double by = 1);
    void set(const std::string& name, double value, const Labels& labels = {});  // gauges, or mirrored counters
    void observe(const std::string& name, double value, const Labels& labels = {});
    // Gauge `name` holds this one series alone afterwards: an info gauge whose labels carry the state
    // (a stale label set would otherwise stay in every later scrape).
    void set_only(const std::string& name, double value, const Labels& labels);

    double value(const std::string& name, const Labels& labels = {}) const;  // counter/gauge; 0 if unset
    uint64_t count(const std::string& name, const Labels& labels = {}) const;  // histogram observations

    std::string render() const;

private:
    struct Series {
        double value = 0;                // counter / gauge
        std::vector<uint64_t> buckets;   // histogram: per-bucket (non-cumulative) counts, +Inf last
        double sum = 0;
        uint64_t count = 0;
    };
    struct Family {
        std::string name, help;
        MetricType type;
        std::vector<std::string> label_names;
        std::vector<double> bounds;
        std::map<Labels, Series> series;
    };
    struct Alias {
        const Family* family;
        std::string name;
        std::vector<std::string> label_names, label_values;  // the constant labels
    };
    Family& family(const std::string& name);
    const Family& family(const std::string& name) const;
    void add(Family f);
    void render_family(std::string& out, const Family& f, const std::string& name, const Alias* alias) const;

    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<Family>> families_;
    std::map<std::string, Family*> by_name_;
    std::vector<Alias> aliases_;
    std::vector<std::string> constant_names_, constant_values_;
};

std::string escape_label_value(const std::string& value);
std::string format_metric_value(double v);  // Prometheus float syntax (+Inf, -Inf, NaN)

}  // namespace pagoda::server
