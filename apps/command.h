// Subcommand registry for the one `pagoda` binary. Each apps/cmd_*.cpp defines a static
// CommandRegistration: it adds its options to a CLI11 subcommand and returns a callback that runs it.
// Adding a command never touches main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace pagoda::app {

// setup() declares the options on `sub` and returns what to run once they are parsed.
// The run callback returns the process exit status.
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandInfo {
    std::string name;
    std::string description;
    CommandSetup setup;
};

std::vector<CommandInfo>& command_registry();

struct CommandRegistration {
    CommandRegistration(std::string name, std::string description, CommandSetup setup) {
        command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
    }
};

}  // namespace pagoda::app
