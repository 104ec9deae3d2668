// The three paths the build configures (see tests/CMakeLists.txt): compiled here only.
#include "fixtures.h"

namespace pagoda::test {

std::string configured_fixtures_dir() { return PAGODA_FIXTURES_DIR; }
std::string source_dir() { return PAGODA_SOURCE_DIR; }
std::string pagoda_binary() { return PAGODA_BINARY; }

}  // namespace pagoda::test
