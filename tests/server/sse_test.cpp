// SSE framing and the incremental parser (any split of the byte stream gives the same events).
#include <gtest/gtest.h>

#include "server/sse.h"

using namespace pagoda::server;

TEST(Sse, Framing) {
    EXPECT_EQ(sse_data(R"({"a":1})"), "data: {\"a\":1}\n\n");
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
    EXPECT_EQ(sse_comment("ping"), ": ping\n\n");
}

TEST(Sse, ParserSurvivesEverySplit) {
    const std::string stream = sse_data("{\"x\":1}") + sse_comment("ping") + sse_data("second") +
                               "event: message\r\ndata: multi\r\ndata: line\r\n\r\n" + "data:nospace\r\r" + sse_done();
    const std::vector<std::string> want = {"{\"x\":1}", "second", "multi\nline", "nospace", "[DONE]"};
    for (size_t split = 0; split <= stream.size(); ++split) {
        SseParser p;
        auto a = p.feed(std::string_view(stream).substr(0, split));
        auto b = p.feed(std::string_view(stream).substr(split));
        a.insert(a.end(), b.begin(), b.end());
        EXPECT_EQ(a, want) << "split at " << split;
        EXPECT_EQ(p.comments(), 1u);
    }
    SseParser bytewise;
    std::vector<std::string> got;
    for (char c : stream)
        for (auto& e : bytewise.feed(std::string_view(&c, 1))) got.push_back(e);
    EXPECT_EQ(got, want);
}

TEST(Sse, IncompleteEventIsHeldBack) {
    SseParser p;
    EXPECT_TRUE(p.feed("data: partial\n").empty());
    EXPECT_EQ(p.feed("\n"), std::vector<std::string>{"partial"});
}
