// pagoda: one binary, many subcommands (see apps/cmd_*.cpp).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "apps/command.h"
#include "core/error.h"

namespace pagoda::app {
std::vector<CommandInfo>& command_registry() {
    static std::vector<CommandInfo> registry;
    return registry;
}
}  // namespace pagoda::app

int main(int argc, char** argv) {
    using namespace pagoda::app;
    CLI::App app{"pagoda: LLM inference engine and server for llama-family GGUF models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "pagoda 0.1.0");
    auto& registry = command_registry();
    std::sort(registry.begin(), registry.end(), [](auto& a, auto& b) { return a.name < b.name; });
    std::map<CLI::App*, std::function<int()>> runners;
    for (auto& cmd : registry) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
        runners[sub] = cmd.setup(*sub);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        for (auto& [sub, run] : runners)
            if (sub->parsed()) return run();
    } catch (const pagoda::Error& e) {
        std::fprintf(stderr, "pagoda: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pagoda: internal error: %s\n", e.what());
        return 2;
    }
    return 1;
}
