// POST /infill in llama-server's shape: input_prefix / input_suffix / input_extra / prompt, plus the
// sampling fields of /v1/completions, which parse_completion_request checks and parses as usual.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// The fields /infill adds to /v1/completions' (taken out before the rest is parsed as completions).
constexpr const char* kInfillFields[] = {"input_prefix", "input_suffix", "input_extra", "prompt"};

std::string string_field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return {};
    if (!it->is_string())
        throw ApiError::invalid(fmt::format("'{}' must be a string", name), name, "invalid_type");
    return it->get<std::string>();
}

std::vector<FimChunk> extra_chunks(const json& body) {
    std::vector<FimChunk> out;
    auto it = body.find("input_extra");
    if (it == body.end() || it->is_null()) return out;
    if (!it->is_array())
        throw ApiError::invalid("'input_extra' must be an array of {\"filename\": string, \"text\": string}",
                                "input_extra", "invalid_type");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& chunk = (*it)[i];
        const std::string name = fmt::format("input_extra[{}]", i);
        if (!chunk.is_object())
            throw ApiError::invalid(fmt::format("'{}' must be an object {{\"filename\": string, \"text\": string}}", name),
                                    name, "invalid_type");
        FimChunk c{.filename = "tmp"};  // llama-server's name for a chunk without one
        for (auto f = chunk.begin(); f != chunk.end(); ++f) {
            const std::string fname = name + "." + f.key();
            if (f.key() != "filename" && f.key() != "text")
                throw ApiError::invalid(fmt::format("'{}' is not a field of an input_extra chunk (filename, text)", fname),
                                        fname, "unsupported_parameter");
            if (!f->is_string())
                throw ApiError::invalid(fmt::format("'{}' must be a string", fname), fname, "invalid_type");
            (f.key() == "text" ? c.text : c.filename) = f->get<std::string>();
        }
        if (!chunk.contains("text"))
            throw ApiError::invalid(fmt::format("'{}' needs a \"text\" string", name), name + ".text",
                                    "missing_required_parameter");
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace

CompletionParams parse_infill_request(const json& body) {
    if (!body.is_object())
        throw ApiError::invalid("the body of POST /infill must be a JSON object", "body", "invalid_type");
    // /v1/completions' own spellings of what /infill names differently are refused, not mixed in.
    if (body.contains("suffix") && !body["suffix"].is_null())
        throw ApiError::invalid("'suffix' is /v1/completions' field; /infill takes 'input_suffix'", "suffix",
                                "unsupported_parameter");
    if (body.contains("echo") && !body["echo"].is_null())
        throw ApiError::invalid("'echo' is not supported on /infill", "echo", "unsupported_parameter");
    FimRequest fim{.infill = true};
    fim.prefix = string_field(body, "input_prefix");
    fim.suffix = string_field(body, "input_suffix");
    fim.extra = extra_chunks(body);
    json rest = body;
    for (const char* name : kInfillFields) rest.erase(name);
    rest["prompt"] = string_field(body, "prompt");  // the text typed after the prefix (may be empty)
    CompletionParams p = parse_completion_request(rest, Endpoint::completions);
    p.fim = std::move(fim);
    return p;
}

}  // namespace pagoda::server
