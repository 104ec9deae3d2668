// Reads a whole text file for a subcommand, failing with a message that says what the file was for
// — also when the path names a directory, which a stream would read as an empty file.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace pagoda::app {

inline std::string read_text_file(const std::string& path, const char* what) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail("the {} '{}' is a directory, not a file", what, path);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read the {} '{}'", what, path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace pagoda::app
