// Runs the built `pagoda` binary with arguments (no shell) and captures stdout, stderr and the exit
// status, for end-to-end tests.
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

#include "env_guard.h"  // EnvGuard, for the child processes' environment

namespace pagoda::test {

struct ProcessResult {
    int exit_code = -1;
    std::string out, err;
};

ProcessResult run_pagoda(const std::vector<std::string>& args, const std::string& stdin_text = "");


}  // namespace pagoda::test
