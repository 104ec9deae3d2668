// Minimal levelled logging to stderr. Level from PAGODA_LOG (error|warn|info|debug), default info.
#pragma once
#include <cstdio>
#include <fmt/format.h>

namespace pagoda {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& message);

template <class... A> void log_info(fmt::format_string<A...> f, A&&... a) {
    if (log_level() >= LogLevel::info) log_write(LogLevel::info, fmt::format(f, std::forward<A>(a)...));
}
template <class... A> void log_warn(fmt::format_string<A...> f, A&&... a) {
    if (log_level() >= LogLevel::warn) log_write(LogLevel::warn, fmt::format(f, std::forward<A>(a)...));
}
template <class... A> void log_debug(fmt::format_string<A...> f, A&&... a) {
    if (log_level() >= LogLevel::debug) log_write(LogLevel::debug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A> void log_error(fmt::format_string<A...> f, A&&... a) {
    log_write(LogLevel::error, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace pagoda
