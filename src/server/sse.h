// Server-sent events (text/event-stream) framing as OpenAI streams use it: each event is one
// `data: <json>` line and a blank line; the stream ends with `data: [DONE]`; lines starting with ':'
// are comments (our keep-alive `: ping`). SseParser is the incremental reader for clients (the
// bench-serve load generator, tests): it accepts \n, \r\n or \r line ends, joins multi-line data
// with \n, and skips comments and fields other than data.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::server {

std::string sse_data(std::string_view payload);   // "data: <payload>\n\n" (payload has no newlines)
std::string sse_done();                           // "data: [DONE]\n\n"
std::string sse_comment(std::string_view text);   // ": <text>\n\n"

class SseParser {
public:
    // Feeds bytes; returns the data of every event completed by them, in order.
    std::vector<std::string> feed(std::string_view bytes);
    size_t comments() const { return comments_; }  // comment lines seen so far

private:
    void line(std::string_view text, std::vector<std::string>& out);

    std::string partial_;  // bytes of an unfinished line
    std::string data_;     // data lines of the current event
    bool has_data_ = false;
    bool last_cr_ = false;
    size_t comments_ = 0;
};

}  // namespace pagoda::server
