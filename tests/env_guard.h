// Sets (or, given no value, unsets) an environment variable for one scope and restores it after:
// for tests of the PAGODA_* overrides, in this process and in the child processes it starts.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace pagoda::test {

struct EnvGuard {
    std::string name;
    std::string old;
    bool had = false;
    EnvGuard(std::string n, std::optional<std::string> value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) {
            had = true;
            old = v;
        }
        if (value) setenv(name.c_str(), value->c_str(), 1);
        else unsetenv(name.c_str());
    }
    ~EnvGuard() {
        if (had) setenv(name.c_str(), old.c_str(), 1);
        else unsetenv(name.c_str());
    }
    EnvGuard(const EnvGuard&) = delete;
    EnvGuard& operator=(const EnvGuard&) = delete;
};

}  // namespace pagoda::test
