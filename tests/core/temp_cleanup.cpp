// Removes the per-process scratch folder of pagoda::test::temp_path() when the test binary exits.
#include <filesystem>
#include <gtest/gtest.h>
#include <unistd.h>

namespace {

class TempDirCleanup : public ::testing::Environment {
public:
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(
            std::filesystem::temp_directory_path() / ("pagoda-test-" + std::to_string(::getpid())), ignored);
    }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

}  // namespace
