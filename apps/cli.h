// Option helpers every subcommand shares, so one flag has one spelling, one range and one meaning
// across the binary, and a bad value is refused in plain words naming the flag:
//   in_range(lo, hi)     a numeric check whose failure reads "'abc' is not a number" or
//                        "7 is out of range: use 0 to 1" (CLI11 prefixes the flag's name);
//   add_threads_option   -t/--threads, where 0 (the default) means one thread per physical core
//                        (capped by a container CPU limit or affinity mask).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <string>
#include <type_traits>

namespace pagoda::app {

template <typename T>
CLI::Validator in_range(T lo, T hi) {
    static_assert(std::is_arithmetic_v<T>);
    auto check = [lo, hi](std::string& text) -> std::string {
        T value{};
        if (!CLI::detail::lexical_cast(text, value))
            return fmt::format("'{}' is not {}", text, std::is_integral_v<T> ? "a whole number" : "a number");
        if (value < lo || value > hi) return fmt::format("{} is out of range: use {} to {}", text, lo, hi);
        return {};
    };
    return CLI::Validator(check, fmt::format("{} to {}", lo, hi));
}

inline CLI::Option* add_threads_option(CLI::App& sub, int& threads) {
    return sub.add_option("-t,--threads", threads, "Compute threads (0: one per physical core, at most the CPUs a container limit or affinity mask allows)")
        ->check(in_range(0, 1024));
}

}  // namespace pagoda::app
