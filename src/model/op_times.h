// Wall-clock time per graph op, summed over the steps a model runs while its timer is set
// (StepModel::set_op_times): where a step's time goes, for `pagoda bench --op-times`. Each op is
// timed on the host around its backend call; the cpu and reference backends finish an op before
// returning, so that is the op's own time (a backend that queues work would synchronise per op).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace pagoda::model {

struct OpTimes {
    struct Entry {
        int64_t calls = 0;
        double seconds = 0;
        double weight_bytes = 0;  // by_weight: the bytes of weight memory those calls streamed
    };
    std::map<std::string, Entry> by_op;  // the graph's op names (model/graph.h op_name)
    // The ops that stream a weight from host memory (matmuls, fused or not), by what the weight is
    // ("attention q|k|v", "attention output", "ffn gate|up", "ffn down", "output head", "other"): the
    // same ops' time as in by_op, split so each weight's rate (bytes / seconds) can be read.
    std::map<std::string, Entry> by_weight;
    int64_t steps = 0;                   // forward() calls timed
    double step_seconds = 0;             // their whole time, ops and what runs between them

    double op_seconds() const {
        double s = 0;
        for (const auto& [name, e] : by_op) s += e.seconds;
        return s;
    }
};

}  // namespace pagoda::model
