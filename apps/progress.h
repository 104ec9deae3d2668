// Progress of a long loop on stderr, for every subcommand alike: on a terminal a line redrawn in
// place ('\r'), in a log file or pipe plain lines — the first, then at most one every two seconds,
// and the last — so logs never fill with carriage returns and a long run still shows it is alive.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace pagoda::app {

class Progress {
public:
    // `what` names the units counted ("tensors", "windows", "requests").
    Progress(std::string what, size_t total)
        : what_(std::move(what)), total_(total), terminal_(isatty(STDERR_FILENO) == 1) {}
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    ~Progress() { finish(); }

    // `detail` follows the count, e.g. "running perplexity 12.3".
    void update(size_t done, const std::string& detail = "") {
        const auto now = std::chrono::steady_clock::now();
        const bool last = done >= total_;
        if (!terminal_ && drawn_ && !last && now - last_line_ < std::chrono::seconds(2)) return;
        last_line_ = now;
        const std::string line = bar(done) + (detail.empty() ? "" : ": " + detail);
        if (terminal_) std::fprintf(stderr, "\r%s\x1b[K", line.c_str());  // \x1b[K: clear a longer old line
        else std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
        drawn_ = true;
    }

    // As update(), but off a terminal always a line: for callers that choose their own moments.
    void line(size_t done, const std::string& detail) {
        drawn_ = false;  // lifts the two-second limit for this one
        update(done, detail);
    }

    bool terminal() const { return terminal_; }

    // Ends a terminal's redrawn line, so what is printed next starts on a line of its own.
    void finish() {
        if (drawn_ && terminal_ && !finished_) std::fputc('\n', stderr);
        finished_ = true;
    }

private:
    std::string bar(size_t done) const {
        const size_t width = 30, filled = total_ ? std::min(width, done * width / total_) : width;
        const std::string count = std::to_string(done) + "/" + std::to_string(total_) + " " + what_;
        if (!terminal_) return count;
        return "[" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " + count;
    }

    std::string what_;
    size_t total_;
    bool terminal_, drawn_ = false, finished_ = false;
    std::chrono::steady_clock::time_point last_line_{};
};

}  // namespace pagoda::app
