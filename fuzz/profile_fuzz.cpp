// libFuzzer entry for tuning profiles (src/tune/profile.h): arbitrary bytes as a profile's text.
// Oracles: a refusal is a pagoda::Error (never another exception or a crash); a profile that parses
// prints back to JSON that parses to the same JSON (the writer and the strict reader agree).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "tune/profile.h"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    tune::Profile p;
    try {
        p = tune::parse_profile(text, "fuzz");
    } catch (const Error&) {
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "profile parse threw a non-pagoda exception: %s\n", e.what());
        std::abort();
    }
    const nlohmann::json once = tune::profile_to_json(p);
    tune::Profile again;
    try {
        again = tune::parse_profile(once.dump(), "fuzz round trip");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "a parsed profile did not parse after printing: %s\n", e.what());
        std::abort();
    }
    if (tune::profile_to_json(again) != once) {
        std::fprintf(stderr, "profile round trip changed the JSON\n");
        std::abort();
    }
    return 0;
}
