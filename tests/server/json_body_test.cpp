// parse_json_body: every malformed body is a 400 invalid_json (found by fuzzing: a number beyond
// double's range, such as 1e400, escaped as nlohmann's out_of_range and was answered 500).
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"

using namespace pagoda::server;

namespace {

ApiError body_error(std::string_view bytes) {
    try {
        parse_json_body(bytes);
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "not refused: " << bytes;
    return ApiError::internal("not refused");
}

}  // namespace

TEST(JsonBody, NumbersOutOfRangeAreInvalidJson) {
    for (std::string_view bytes : {R"({"temperature": 1e400})", R"([-1e999])", R"({"messages": [{"content": 1e400}]})"}) {
        const ApiError e = body_error(bytes);
        EXPECT_EQ(e.status, 400) << bytes;
        EXPECT_EQ(e.code, "invalid_json") << bytes;
        EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    }
}

TEST(JsonBody, SyntaxAndEncodingErrorsAreInvalidJson) {
    for (std::string_view bytes : {"", "{", "{\"a\": \"\xff\"}", "[1,]"}) {
        const ApiError e = body_error(bytes);
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_json");
    }
    EXPECT_EQ(parse_json_body(R"({"a": 1e300})")["a"].get<double>(), 1e300);  // large but finite is fine
}
