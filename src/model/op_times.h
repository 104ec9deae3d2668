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
    };
    std::map<std::string, Entry> by_op;  // the graph's op names (model/graph.h op_name)
    int64_t steps = 0;                   // forward() calls timed
    double step_seconds = 0;             // their whole time, ops and what runs between them

    double op_seconds() const {
        double s = 0;
        for (const auto& [name, e] : by_op) s += e.seconds;
        return s;
    }
};

}  // namespace pagoda::model
