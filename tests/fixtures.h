// Where tests find things: the shared fixtures folder (PAGODA_FIXTURES env, else the CMake
// setting, default ../shared), the source tree, and the built `pagoda` binary.
// Tests that need a fixture call PAGODA_REQUIRE_FIXTURE(path) which skips with a clear message.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

namespace pagoda::test {

// The build's paths live in fixture_paths.cpp alone, so no other test object embeds an absolute
// path and ccache can share test objects between checkouts.
std::string configured_fixtures_dir();
std::string source_dir();
std::string pagoda_binary();

inline std::string fixtures_dir() {
    if (const char* env = std::getenv("PAGODA_FIXTURES"); env && *env) return env;
    return configured_fixtures_dir();
}
inline std::string fixture(const std::string& rel) { return fixtures_dir() + "/" + rel; }
inline std::string temp_path(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("pagoda-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return (dir / name).string();
}

}  // namespace pagoda::test

#define PAGODA_REQUIRE_FIXTURE(path)                                                        \
    do {                                                                                    \
        if (!std::filesystem::exists(path))                                                 \
            GTEST_SKIP() << "fixture not found: " << (path)                                 \
                         << " (set PAGODA_FIXTURES to the shared fixtures folder)";         \
    } while (0)
