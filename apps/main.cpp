// pagoda: one binary, many subcommands (see apps/cmd_*.cpp).
//
// Exit status: 0 on success (and for --help / --version), 1 for every error the user can fix — a
// bad flag or value as much as a missing file — with one line "pagoda: error: ..." on stderr, 2
// for an internal error.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/error.h"

namespace pagoda::app {
std::vector<CommandInfo>& command_registry() {
    static std::vector<CommandInfo> registry;
    return registry;
}
}  // namespace pagoda::app

namespace {

// llama.cpp's multi-letter short flags. CLI11 reads "-ngl" as "-n gl", so each is rewritten to its
// long name before parsing ("-ngl=99" too). Everything after "--" is left alone.
const std::map<std::string, std::string> kLlamaShortFlags = {
    {"-ngl", "--n-gpu-layers"},
    {"-fa", "--flash-attn"},
    {"-np", "--parallel"},
    {"-sys", "--system-prompt"},
    {"-md", "--draft-model"},
};

std::vector<std::string> rewrite_llama_short_flags(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
        const std::string& arg = args[i];
        const std::string name = arg.substr(0, arg.find('='));
        if (auto it = kLlamaShortFlags.find(name); it != kLlamaShortFlags.end()) args[i] = it->second + arg.substr(name.size());
    }
    return args;
}

// The subcommand being parsed when the error was thrown (or the app itself).
const CLI::App* parsed_command(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return s->parsed(); })) return sub;
    return &app;
}

// CLI11's messages made plain: which flag or argument is wrong, and why.
std::string describe_parse_error(const CLI::ParseError& e, const CLI::App& app) {
    const CLI::App* command = parsed_command(app);
    if (command == &app && dynamic_cast<const CLI::RequiredError*>(&e)) {  // no subcommand parsed
        const std::vector<std::string> extra = app.remaining();
        if (!extra.empty() && extra.front()[0] != '-') return fmt::format("unknown command '{}'", extra.front());
        return "no command given";
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        const std::vector<std::string> extra = command->remaining();
        if (!extra.empty()) {
            const std::string& first = extra.front();
            if (first.size() > 1 && first[0] == '-') return fmt::format("unknown option '{}'", first);
            return fmt::format("unexpected argument '{}'", first);
        }
    }
    static const std::regex conversion(R"(^Could not convert: (\S+) = (.*)$)");
    std::smatch m;
    const std::string what = e.what();
    if (std::regex_match(what, m, conversion)) return fmt::format("{}: '{}' is not a valid value", m[1].str(), m[2].str());
    return what;
}

int report_parse_error(const CLI::ParseError& e, CLI::App& app) {
    // --help and --version arrive as "errors" with exit code 0: print them as CLI11 does.
    if (e.get_exit_code() == 0) return app.exit(e);
    const CLI::App* command = parsed_command(app);
    const std::string help = command == &app ? "pagoda --help" : "pagoda " + command->get_name() + " --help";
    std::fprintf(stderr, "pagoda: error: %s (%s lists the options)\n", describe_parse_error(e, app).c_str(), help.c_str());
    return 1;
}

}  // namespace

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
        sub->option_defaults()->always_capture_default();  // --help shows every default
        runners[sub] = cmd.setup(*sub);
    }
    std::vector<std::string> args = rewrite_llama_short_flags(argc, argv);
    std::vector<char*> arg_pointers;
    for (auto& a : args) arg_pointers.push_back(a.data());
    try {
        app.parse(int(arg_pointers.size()), arg_pointers.data());
    } catch (const CLI::ParseError& e) {
        return report_parse_error(e, app);
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
