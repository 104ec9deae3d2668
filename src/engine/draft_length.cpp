#include "engine/draft_length.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {
namespace {
constexpr double kKeep = 0.95;  // weight of the past in the decayed sums
}

void DecayedLinearFit::observe(double x, double y) {
    n_ = kKeep * n_ + 1;
    sx_ = kKeep * sx_ + x;
    sy_ = kKeep * sy_ + y;
    sxx_ = kKeep * sxx_ + x * x;
    sxy_ = kKeep * sxy_ + x * y;
}

double DecayedLinearFit::spread() const { return sxx_ * n_ - sx_ * sx_; }  // n² times the variance of x

bool DecayedLinearFit::has_spread() const { return n_ >= 1.5 && spread() > 1e-9 * n_ * n_; }

double DecayedLinearFit::slope() const {
    if (!has_spread()) return 0.0;  // all points at one x: no slope to fit
    const double var = spread();
    return std::max(0.0, (sxy_ * n_ - sx_ * sy_) / var);
}

double DecayedLinearFit::at(double x) const {
    if (n_ <= 0) return 0.0;
    const double b = slope(), a = (sy_ - b * sx_) / n_;
    return std::max(a + b * x, 1e-3 * sy_ / n_);
}

void DraftCostModel::observe_step(double seconds, int64_t rows, int64_t seqs) {
    if (!(seconds > 0) || rows < 1 || seqs < 1) return;
    step_.observe(double(rows), seconds);
}

void DraftCostModel::observe_draft(double seconds, int64_t rows) {
    if (rows < 1 || !(seconds > 0)) return;
    draft_.observe(double(rows), seconds);
}

double DraftCostModel::plain_seconds(int64_t seqs) const { return step_.at(double(seqs)); }

double DraftCostModel::draft_cost(int64_t seqs, int64_t drafting) const {
    const double plain = plain_seconds(seqs);
    const int64_t rows = drafting > 0 ? drafting : std::max<int64_t>(1, seqs);
    return plain > 0 && !draft_.empty() ? draft_.at(double(rows)) / plain : 0.0;
}

double DraftCostModel::row_cost(int64_t seqs) const {
    const double plain = plain_seconds(seqs);
    return plain > 0 ? step_.slope() / plain : 0.0;
}

DraftCostModel::Best DraftCostModel::best(double alpha, int32_t max_k, int64_t seqs, int64_t drafting) const {
    alpha = std::clamp(alpha, 0.0, 0.999);
    const double s = double(std::max<int64_t>(1, seqs));
    const double d = drafting > 0 && double(drafting) < s ? double(drafting) : s;
    // k draft forwards, each serving the d drafting sequences, and k verified rows for each of them.
    const double per_token = draft_cost(seqs, int64_t(d)) + d * row_cost(seqs);
    Best b;
    double expected = 1.0, power = 1.0;  // E(0) = 1: one token per sequence and plain step
    for (int32_t k = 1; k <= max_k; ++k) {
        power *= alpha;
        expected += power;
        const double rate = ((s - d) + d * expected) / (s * (1.0 + double(k) * per_token));
        if (rate > b.rate * 1.01) {  // a longer draft must pay clearly, not by noise
            b.k = k;
            b.rate = rate;
        }
    }
    return b;
}

bool DraftCostModel::measured() const {
    // Three forwards give the draft fit a catch-up point and draft rounds; the steps need two widths
    // and a few points, as one pair of steps misjudges a verified row's cost by half.
    return draft_.weight() >= 2.5 && step_.has_spread() && step_.weight() >= 3.5;
}

bool DraftCostModel::catch_up_pays(double alpha, int32_t max_k, int64_t seqs, int64_t drafting, int64_t backlog,
                                   int64_t tokens_left) const {
    if (!measured()) return true;
    if (backlog <= 0) return true;
    const double rate = best_rate(alpha, max_k, seqs, drafting);
    if (rate <= 1.0 || tokens_left <= 0) return false;
    // The rate is the batch's: over the tokens this sequence has left, the batch saves 1 - 1/rate of
    // its plain steps, and this sequence's share of that is one in `drafting`.
    const double d = double(drafting > 0 ? std::min(drafting, seqs) : seqs);
    const double saved = double(tokens_left) * plain_seconds(seqs) * (1.0 - 1.0 / rate) / std::max(1.0, d);
    // Twice over: the estimates are young when sequences join, and a catch-up cannot be taken back.
    return 2.0 * draft_.at(double(backlog)) < saved;
}

void AcceptanceEstimate::observe(int64_t drafted, int64_t accepted_now) {
    constexpr double kDecay = 0.9;
    accepted = kDecay * accepted + double(accepted_now);
    refused = kDecay * refused + (accepted_now < drafted ? 1.0 : 0.0);
}

}  // namespace pagoda::engine
