#include "lora/lora_spec.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

#include "core/error.h"

namespace pagoda::lora {
namespace {

[[noreturn]] void refuse(const std::string& what, const std::string& reason) {
    if (what.empty()) throw Error(reason);
    fail("{}: {}", what, reason);
}

bool exists_from(const std::filesystem::path& dir, const std::string& path) {
    const std::filesystem::path p = path;
    std::error_code ec;  // an unreadable place counts as absent, never as an error here
    return std::filesystem::exists(p.is_absolute() || dir.empty() ? p : dir / p, ec);
}

}  // namespace

float parse_lora_scale(const std::string& text, const std::string& what) {
    size_t used = 0;
    float v = 0;
    try {
        v = std::stof(text, &used);
    } catch (const std::exception&) {  // not a number, or out of float's range
        used = 0;
    }
    // stof skips leading spaces: " 2" is refused as well, so a scale reads the same everywhere.
    if (text.empty() || used != text.size() || !std::isfinite(v) || std::isspace(static_cast<unsigned char>(text[0])))
        refuse(what, "the scale '" + text + "' is not a number");
    return v;
}

LoraSpec parse_lora_path(const std::string& text, const std::string& what, const std::filesystem::path& dir) {
    LoraSpec s;
    s.path = text;
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && colon + 1 < text.size() && !exists_from(dir, text)) {
        s.scale = parse_lora_scale(text.substr(colon + 1), what);
        s.path = text.substr(0, colon);
    }
    if (s.path.empty()) refuse(what, "no adapter path");
    return s;
}

LoraSpec parse_lora_spec(const std::string& text, const std::string& what, const std::filesystem::path& dir) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) refuse(what, "'" + text + "' must be NAME=PATH[:SCALE]");
    if (eq == 0) refuse(what, "the adapter name before '=' is empty");
    LoraSpec s = parse_lora_path(text.substr(eq + 1), what, dir);
    s.name = text.substr(0, eq);
    return s;
}

}  // namespace pagoda::lora
