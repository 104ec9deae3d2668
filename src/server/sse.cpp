#include "server/sse.h"

namespace pagoda::server {

std::string sse_data(std::string_view payload) {
    std::string out;
    out.reserve(payload.size() + 8);
    out += "data: ";
    out += payload;
    out += "\n\n";
    return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_comment(std::string_view text) {
    std::string out = ": ";
    out += text;
    out += "\n\n";
    return out;
}

std::vector<std::string> SseParser::feed(std::string_view bytes) {
    std::vector<std::string> out;
    for (char c : bytes) {
        if (c == '\n' && last_cr_) {  // the \n of a \r\n pair: the line already ended at \r
            last_cr_ = false;
            continue;
        }
        last_cr_ = c == '\r';
        if (c == '\n' || c == '\r') {
            std::string text;
            text.swap(partial_);
            line(text, out);
        } else {
            partial_ += c;
        }
    }
    return out;
}

void SseParser::line(std::string_view text, std::vector<std::string>& out) {
    if (text.empty()) {  // blank line: dispatch the event
        if (has_data_) out.push_back(std::move(data_));
        data_.clear();
        has_data_ = false;
        return;
    }
    if (text[0] == ':') {
        ++comments_;
        return;
    }
    std::string_view name = text, value;
    if (auto colon = text.find(':'); colon != std::string_view::npos) {
        name = text.substr(0, colon);
        value = text.substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    }
    if (name != "data") return;  // event, id, retry: not used by OpenAI streams
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
}

}  // namespace pagoda::server
