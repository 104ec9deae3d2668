#include "e2e/process.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"

namespace pagoda::test {
namespace {
std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}
}  // namespace

ProcessResult run_pagoda(const std::vector<std::string>& args, const std::string& stdin_text) {
    static int counter = 0;
    const std::string base = temp_path("proc" + std::to_string(counter++));
    const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
    std::ofstream(in_path, std::ios::binary) << stdin_text;
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(in_path.c_str(), "rb", stdin) || !freopen(out_path.c_str(), "wb", stdout) ||
            !freopen(err_path.c_str(), "wb", stderr))
            _exit(127);
        std::vector<char*> argv;
        std::string bin = pagoda_binary();
        argv.push_back(bin.data());
        std::vector<std::string> copy = args;
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ProcessResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    return r;
}

}  // namespace pagoda::test
