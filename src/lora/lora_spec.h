// The one reading of an adapter on a command line or in models.json: `NAME=PATH[:SCALE]`. The text
// after the first '=' is the path; a suffix after its last ':' is the scale unless the whole text
// names a path that exists (a file whose own name has a colon wins over a scale). Errors read
// "WHAT: REASON", or just the reason when `what` is empty (the caller names the place itself).
#pragma once
#include <filesystem>
#include <string>

namespace pagoda::lora {

struct LoraSpec {
    std::string name, path;
    float scale = 1;
};

// A finite decimal number, the whole text; throws "WHAT: the scale 'TEXT' is not a number".
float parse_lora_scale(const std::string& text, const std::string& what);

// "PATH[:SCALE]". `dir`: where a relative PATH is looked for when deciding whether it exists (the
// returned path stays as written). Throws on an empty path or a bad scale.
LoraSpec parse_lora_path(const std::string& text, const std::string& what, const std::filesystem::path& dir = {});

// "NAME=PATH[:SCALE]". Throws when there is no '=', the name or the path is empty, or the scale is bad.
LoraSpec parse_lora_spec(const std::string& text, const std::string& what, const std::filesystem::path& dir = {});

}  // namespace pagoda::lora
