#include "core/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pagoda {
namespace {
LogLevel initial_level() {
    const char* env = std::getenv("PAGODA_LOG");
    if (!env) return LogLevel::info;
    if (!std::strcmp(env, "error")) return LogLevel::error;
    if (!std::strcmp(env, "warn")) return LogLevel::warn;
    if (!std::strcmp(env, "debug")) return LogLevel::debug;
    return LogLevel::info;
}
std::atomic<int> g_level{int(initial_level())};
std::mutex g_mutex;
}  // namespace

LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level.store(int(level)); }

void log_write(LogLevel level, const std::string& message) {
    static const char* names[] = {"error", "warn", "info", "debug"};
    std::lock_guard<std::mutex> lock(g_mutex);
    std::fprintf(stderr, "pagoda %s: %s\n", names[int(level)], message.c_str());
}

}  // namespace pagoda
