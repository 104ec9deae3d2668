// The request-field audit: every top-level field is honoured, a no-op by definition, or refused
// with a 400 naming it; unknown fields are refused; docs/api.md's table is the code's list.
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>

#include "fixtures.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_fields.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

ApiError error_of(const std::string& body, Endpoint ep = Endpoint::completions) {
    try {
        parse_completion_request(parse_json_body(body), ep);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

std::string base(Endpoint ep) {
    return ep == Endpoint::completions ? R"("prompt":"a")" : R"("messages":[{"role":"user","content":"a"}])";
}

}  // namespace

TEST(RequestFields, UnknownAndRefusedFieldsAreA400NamingThem) {
    for (Endpoint ep : {Endpoint::completions, Endpoint::chat_completions}) {
        ApiError e = error_of("{" + base(ep) + R"(,"some_future_field":{"a":1}})", ep);
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "some_future_field");
        EXPECT_EQ(e.code, "unsupported_parameter");
        // null is "not given", for unknown fields as for known ones.
        EXPECT_EQ(error_of("{" + base(ep) + R"(,"some_future_field":null})", ep).status, 0);
        for (const RequestField& f : request_fields()) {
            if (f.use != FieldUse::refused || !(ep == Endpoint::chat_completions ? f.chat : f.completions)) continue;
            ApiError r = error_of("{" + base(ep) + ",\"" + std::string(f.name) + "\":1}", ep);
            EXPECT_EQ(r.status, 400) << f.name;
            EXPECT_EQ(r.param, f.name);
            EXPECT_EQ(r.code, "unsupported_parameter") << f.name;
            EXPECT_NE(std::string(r.what()).find(std::string(f.why)), std::string::npos) << r.what();
        }
    }
    // Chat-only fields are unknown on /v1/completions.
    for (const char* f : {"tools", "tool_choice", "parallel_tool_calls", "top_logprobs", "functions"}) {
        ApiError e = error_of(std::string(R"({"prompt":"a",")") + f + R"(":1})");
        EXPECT_EQ(e.param, f);
        EXPECT_EQ(e.code, "unsupported_parameter");
    }
    // The ones issue 19 named as accepted and ignored.
    EXPECT_EQ(error_of(R"({"prompt":"a","guided_choice":["x","y"]})").status, 0);  // honoured since issue 45
    EXPECT_EQ(error_of(R"({"prompt":"a","structured_outputs":{"choice":["x"]}})").param, "structured_outputs");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"functions":[{"name":"f"}]})",
                       Endpoint::chat_completions)
                  .param,
              "functions");
}

TEST(RequestFields, NoOpsAreAcceptedOnlyWhereTheyChangeNothing) {
    const Endpoint chat = Endpoint::chat_completions;
    const std::string m = R"("messages":[{"role":"user","content":"a"}])";
    EXPECT_EQ(error_of("{" + m + R"(,"user":"u","safety_identifier":"s","metadata":{"k":"v"},"store":false,
        "service_tier":"auto","prompt_cache_key":"k","modalities":["text"],"skip_special_tokens":true,
        "cache_prompt":false})",
                       chat)
                  .status,
              0);
    EXPECT_EQ(error_of("{" + m + R"(,"store":true})", chat).param, "store");
    EXPECT_EQ(error_of("{" + m + R"(,"service_tier":"flex"})", chat).param, "service_tier");
    EXPECT_EQ(error_of("{" + m + R"(,"modalities":["text","audio"]})", chat).param, "modalities");
    EXPECT_EQ(error_of("{" + m + R"(,"skip_special_tokens":false})", chat).param, "skip_special_tokens");
    EXPECT_EQ(error_of("{" + m + R"(,"user":5})", chat).param, "user");
    EXPECT_EQ(error_of(R"({"prompt":"a","stream_options":{"include_obfuscation":true}})").param,
              "stream_options.include_obfuscation");
    EXPECT_EQ(error_of(R"({"prompt":"a","stream_options":{"include_obfuscation":false,"include_usage":true}})").status, 0);
    EXPECT_EQ(error_of(R"({"prompt":"a","stream_options":{"continuous_usage_stats":true}})").param,
              "stream_options.continuous_usage_stats");
}

TEST(RequestFields, OtherSchemaSpellingsAreHonoured) {
    for (const char* body : {R"({"prompt":"a","json_schema":{"type":"string","enum":["x","y"]}})",
                             R"({"prompt":"a","guided_json":{"type":"string","enum":["x","y"]}})",
                             R"({"prompt":"a","guided_json":"{\"type\":\"string\",\"enum\":[\"x\",\"y\"]}"})"}) {
        auto p = parse_completion_request(json::parse(body), Endpoint::completions);
        ASSERT_TRUE(p.grammar) << body;
    }
    EXPECT_EQ(error_of(R"({"prompt":"a","json_schema":{"type":"object"},"response_format":{"type":"json_object"}})").status,
              400);
    EXPECT_EQ(error_of(R"({"prompt":"a","guided_json":"{not json"})").param, "guided_json");
    EXPECT_EQ(error_of(R"({"prompt":"a","json_schema":{"type":"integer","minimum":3}})").param, "json_schema");
}

TEST(RequestFields, MinTokensIsRangeChecked) {
    EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt":"a","min_tokens":3,"max_tokens":5})"),
                                       Endpoint::completions)
                  .min_tokens,
              3);
    EXPECT_EQ(error_of(R"({"prompt":"a","min_tokens":6,"max_tokens":5})").param, "min_tokens");
    EXPECT_EQ(error_of(R"({"prompt":"a","min_tokens":-1})").param, "min_tokens");
}

TEST(RequestFields, ErrorsSpeakTheUsersTerms) {
    ApiError big = error_of(R"({"prompt":"a","foo":1e400})");
    EXPECT_EQ(big.status, 400) << "a number beyond a double is the client's error, not a 500";
    EXPECT_EQ(big.code, "invalid_json");
    ApiError bad = error_of(R"({"prompt":"a",)");
    EXPECT_EQ(bad.status, 400);
    for (const ApiError* e : {&big, &bad}) EXPECT_EQ(std::string(e->what()).find("json.exception"), std::string::npos) << e->what();
    EXPECT_NE(std::string(bad.what()).find("line 1, column"), std::string::npos) << bad.what();
    ApiError zero = error_of(R"({"prompt":"a","max_tokens":0})");
    EXPECT_EQ(std::string(zero.what()), "'max_tokens' must be at least 1");
}

TEST(RequestFields, ChatRolesAreOpenAis) {
    const Endpoint chat = Endpoint::chat_completions;
    for (const char* role : {"system", "developer", "user", "assistant"})
        EXPECT_EQ(error_of(std::string(R"({"messages":[{"role":")") + role + R"(","content":"a"}]})", chat).status, 0)
            << role;
    for (const char* role : {"hacker", "", "function", "System"}) {
        ApiError e = error_of(std::string(R"({"messages":[{"role":"user","content":"a"},{"role":")") + role +
                                  R"(","content":"a"}]})",
                              chat);
        EXPECT_EQ(e.status, 400) << role;
        EXPECT_EQ(e.param, "messages[1].role");
    }
}

// docs/api.md's field table (rows "| `name` | yes/— | yes/— | use | why |") is request_fields().
TEST(RequestFields, DocsTableIsTheCodesList) {
    std::ifstream in(pagoda::test::source_dir() + "/docs/api.md");
    ASSERT_TRUE(in) << "docs/api.md not found";
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    const size_t begin = doc.find("<!-- request-fields:begin -->"), end = doc.find("<!-- request-fields:end -->");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    std::istringstream lines(doc.substr(begin, end - begin));
    const std::regex row(R"(^\| `([a-z_]+)` \| (yes|—) \| (yes|—) \| (honoured|no-op|refused) \|.*)");
    std::vector<std::string> documented;
    std::string line;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        documented.push_back(m[1]);
        const RequestField* f = nullptr;
        for (const auto& x : request_fields())
            if (x.name == m[1].str()) f = &x;
        ASSERT_NE(f, nullptr) << "docs/api.md lists '" << m[1] << "', which the code does not know";
        EXPECT_EQ(f->completions, m[2] == "yes") << m[1];
        EXPECT_EQ(f->chat, m[3] == "yes") << m[1];
        EXPECT_EQ(field_use_name(f->use), m[4].str()) << m[1];
    }
    for (const auto& f : request_fields())
        EXPECT_NE(std::find(documented.begin(), documented.end(), std::string(f.name)), documented.end())
            << "docs/api.md's field table lacks '" << f.name << "'";
    EXPECT_EQ(documented.size(), request_fields().size()) << "a field is listed twice";
}
