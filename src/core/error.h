// Errors: every failure pagoda reports to a user is a pagoda::Error carrying a message that names
// the problem (which file, which field, which value). Code throws; the app prints and exits non-zero.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace pagoda {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace pagoda
