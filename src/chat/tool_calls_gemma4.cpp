// ToolCallParser's states for Gemma 4's calls: <|tool_call> (found in running text by step_text),
// then call:NAME{ (the header), the arguments read by Gemma4ArgsReader, then <tool_call|>.
#include "chat/text_scan.h"
#include "chat/tool_calls.h"
#include "chat/tool_calls_markers.h"

namespace pagoda::chat {
namespace {

constexpr size_t kMaxName = 256;  // a longer function name is not one

bool gemma4_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxName) return false;
    for (char c : name)
        if (is_space(c) || c == '<' || c == '>' || c == '}' || c == '"') return false;
    return true;
}

}  // namespace

bool ToolCallParser::step_gemma4(ToolCallParts& out, bool final) {
    switch (state_) {
        case State::gemma4_header: {
            // call:NAME{ — decided within the first kMaxName bytes of the name, so any cut decides the same.
            const Match m = match(pending_, kGemma4CallPrefix, final);
            if (m == Match::partial) return false;
            const size_t from = kGemma4CallPrefix.size(), limit = from + kMaxName;
            const size_t brace = m == Match::yes ? pending_.find('{', from) : std::string::npos;
            if (m == Match::yes && brace == std::string::npos && !final && pending_.size() <= limit) return false;
            const std::string_view name =
                brace == std::string::npos ? std::string_view() : std::string_view(pending_).substr(from, brace - from);
            if (!gemma4_name(name)) {
                give_back(out);  // not a call: the marker and what follows are content
                return true;
            }
            std::string owned(name);
            consume(brace);
            begin_call(out, std::move(owned));
            gemma4_ = Gemma4ArgsReader();
            state_ = State::gemma4_args;
            return true;
        }
        case State::gemma4_args: {
            std::string piece;
            consume(gemma4_.read(pending_, final, piece));
            add_arguments(out, piece);
            if (gemma4_.status() == Gemma4ArgsReader::Status::reading) {
                if (!final) return false;
                end_call();  // cut off inside the arguments: the call keeps what it got
                to_text();
                return true;
            }
            state_ = State::gemma4_end;  // complete, or stopped at a syntax error
            return true;
        }
        case State::gemma4_end: {
            const Match m = match(pending_, kGemma4CallClose, final);
            if (m == Match::partial) return false;
            if (m == Match::yes) consume(kGemma4CallClose.size());
            end_call();
            to_text();
            return true;
        }
        default: return false;
    }
}

}  // namespace pagoda::chat
