// Streams a model's output through a tool-call parser in pieces, as the server does, for the
// parser tests: every delta is checked as it comes and the deltas are collected into whole calls,
// which a test compares with the whole output's parse (expect_same_calls).
#pragma once
#include <gtest/gtest.h>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"

namespace pagoda::chat {

// Feeds `text` to `p` cut at `cuts` (ascending offsets), then finish(). A call's first delta names it
// and takes the next index; a later one continues the open call with a piece of its arguments; a
// call's content offset lies inside its part's content. `argument_deltas` counts the deltas that
// carry arguments.
inline ParsedToolCalls stream_tool_calls(ToolCallParser& p, std::string_view text, const std::vector<size_t>& cuts,
                                         size_t* argument_deltas = nullptr) {
    ParsedToolCalls all;
    auto add = [&](const ToolCallParts& part) {
        all.content += part.content;
        for (const auto& d : part.calls) {
            if (!d.name.empty()) {
                EXPECT_EQ(d.index, all.calls.size()) << text;
            } else {
                EXPECT_EQ(d.index + 1, all.calls.size()) << text << ": a piece of the open call";
                EXPECT_FALSE(d.arguments.empty()) << text;
            }
            EXPECT_LE(d.content_offset, part.content.size()) << text;
            if (argument_deltas && !d.arguments.empty()) ++*argument_deltas;
            collect_tool_calls(all.calls, {d});
        }
    };
    size_t prev = 0;
    for (size_t c : cuts) {
        add(p.feed(text.substr(prev, c - prev)));
        prev = c;
    }
    add(p.feed(text.substr(prev)));
    add(p.finish());
    return all;
}

inline void expect_same_calls(const ParsedToolCalls& a, const ParsedToolCalls& b, const std::string& what) {
    EXPECT_EQ(a.content, b.content) << what;
    ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
    for (size_t i = 0; i < a.calls.size(); ++i) {
        EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
        EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
    }
}

}  // namespace pagoda::chat
