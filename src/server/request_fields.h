// The one list of top-level request fields /v1/completions and /v1/chat/completions know, each
// with what the server does with it: honoured (acted on), a no-op by definition (it cannot change
// what this server answers, e.g. `user`), or refused with a reason. Any field not in the list is
// refused too: the server never accepts a field and ignores it. docs/api.md holds the same table
// (a test compares the two). check_request_fields() runs before the fields are parsed.
#pragma once
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace pagoda::server {

enum class FieldUse { honoured, no_op, refused };
const char* field_use_name(FieldUse use);  // "honoured", "no-op", "refused"

struct RequestField {
    std::string_view name;
    bool completions = false, chat = false;  // the endpoints that know it
    FieldUse use = FieldUse::honoured;
    std::string_view why;  // refused: the reason (and what to send instead); no-op: why nothing changes
};

const std::vector<RequestField>& request_fields();

// Throws ApiError 400 (`unsupported_parameter`, param = the field) for the first field of `body`
// that is refused or unknown for `endpoint`. A field whose value is null counts as absent.
void check_request_fields(const nlohmann::json& body, Endpoint endpoint);
// The same check against another field list: a field counts as known where its `completions`
// column (second_column false) or its `chat` column (true) is set; `path` names the endpoint.
void check_fields_in(const nlohmann::json& body, const std::vector<RequestField>& fields, bool second_column,
                     const char* path);

}  // namespace pagoda::server
