// Runs the built `pagoda` binary with arguments (no shell) and captures stdout, stderr and the exit
// status, for end-to-end tests.
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

namespace pagoda::test {

struct ProcessResult {
    int exit_code = -1;
    std::string out, err;
};

ProcessResult run_pagoda(const std::vector<std::string>& args, const std::string& stdin_text = "");

// Sets an environment variable for the child processes of one test and restores it after.
struct EnvGuard {
    std::string name;
    std::string old;
    bool had = false;
    EnvGuard(const std::string& n, const std::string& value) : name(n) {
        if (const char* v = std::getenv(n.c_str())) {
            had = true;
            old = v;
        }
        setenv(n.c_str(), value.c_str(), 1);
    }
    ~EnvGuard() {
        if (had) setenv(name.c_str(), old.c_str(), 1);
        else unsetenv(name.c_str());
    }
};

}  // namespace pagoda::test
