// parse_reload_request (server/model_reload_request.h): the id from the path, the optional path from
// the body, and the errors for every other shape.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/model_reload_request.h"

namespace pagoda::server {
namespace {

ApiError error_of(std::string_view path, const std::string& body) {
    try {
        parse_reload_request(path, body);
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "no error for " << path << " " << body;
    return ApiError(0, "", "");
}

TEST(ModelReloadRequest, IdFromThePathAndAnOptionalNewPath) {
    ReloadRequest r = parse_reload_request("/admin/models/chat/reload", "");
    EXPECT_EQ(r.id, "chat");
    EXPECT_FALSE(r.path);
    r = parse_reload_request("/admin/models/org%2Fmodel-1/reload", "{}");
    EXPECT_EQ(r.id, "org/model-1");
    EXPECT_FALSE(r.path);
    r = parse_reload_request("/admin/models/chat/reload", R"({"path": "/models/v2.gguf"})");
    EXPECT_EQ(r.path, "/models/v2.gguf");
}

TEST(ModelReloadRequest, OtherShapesAreRefusedNamingTheProblem) {
    EXPECT_EQ(error_of("/admin/models/chat", "").status, 404);
    EXPECT_EQ(error_of("/admin/models//reload", "").status, 404);
    EXPECT_EQ(error_of("/admin/models/chat/unload", "").status, 404);
    EXPECT_EQ(error_of("/admin/models/chat/reload/x", "").status, 404);
    EXPECT_EQ(std::string(error_of("/admin/models/chat/reload", "[]").what()), "the body must be a JSON object: {} or {\"path\": \"...\"}");
    ApiError e = error_of("/admin/models/chat/reload", R"({"paht": "x"})");
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "unknown field 'paht' (known: path)");
    EXPECT_EQ(e.param, "paht");
    EXPECT_EQ(error_of("/admin/models/chat/reload", R"({"path": ""})").param, "path");
    EXPECT_EQ(std::string(error_of("/admin/models/chat/reload", R"({"path": 3})").what()), "'path' must be a non-empty string");
    EXPECT_EQ(error_of("/admin/models/chat/reload", "{not json").status, 400);
}

}  // namespace
}  // namespace pagoda::server
