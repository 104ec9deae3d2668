// Reads a whole text file for a subcommand, failing with a message that says what the file was for.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace pagoda::app {

inline std::string read_text_file(const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read the {} '{}'", what, path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace pagoda::app
