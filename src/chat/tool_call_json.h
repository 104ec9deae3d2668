// The JSON pieces of tool calls, read one byte at a time so a streaming parser can pass a call's
// arguments on as they are generated:
//   JsonMinifier   — an object or array value; passes its bytes on with the white space outside
//                    strings dropped, and says when the value closed (bracket depth outside strings).
//   JsonCallReader — a call object {"name": "f", "arguments"|"parameters": {…} | "json text" | null, …}
//                    in any key order. The call is decided once its name is known (a non-empty string)
//                    and its arguments began as an object (or were read whole: a string, null, absent
//                    at the closing brace); from then on the arguments object streams out minified.
//                    Before that, anything that is not such an object makes it invalid (the caller
//                    gives the text back as content); after it, a syntax error just ends the call.
// json_escape appends text as the inside of a JSON string (", \, control characters escaped; other
// bytes, UTF-8 included, unchanged). Nothing here throws.
#pragma once
#include <string>
#include <string_view>

namespace pagoda::chat {

void json_escape(std::string& out, std::string_view text);
std::string json_quote(std::string_view text);

class JsonMinifier {
public:
    // Appends what to pass on to `out`; the first byte must be '{' or '['. Bytes after done() are ignored.
    void put(char c, std::string& out);
    bool done() const { return done_; }

private:
    int64_t depth_ = 0;
    bool in_string_ = false, escaped_ = false, done_ = false;
};

class JsonCallReader {
public:
    enum class Status {
        reading,   // the byte was taken; more to come
        complete,  // the byte was taken and closed the object
        invalid,   // the byte was not taken: this is not a call (only before decided())
        stopped,   // the byte was not taken: the call ends here (only once decided())
    };
    Status put(char c);

    bool decided() const;
    const std::string& name() const { return name_; }
    // The arguments text so far: the minified object, the string's decoded text, or "{}" (null or absent).
    const std::string& arguments() const { return args_; }
    // Whether the arguments object is still being read (a call cut short leaves it open).
    bool arguments_open() const { return args_kind_ == ArgsKind::object && !args_min_.done(); }

private:
    enum class State { open, key_or_end, key, colon, value, string_value, nested_value, scalar_value, after_value, next_key, closed };
    enum class ArgsKind { none, object, string, null };
    enum class Target { name, arguments, other };
    Status fail() const { return decided() ? Status::stopped : Status::invalid; }
    Status end_value();
    Status close();

    State state_ = State::open;
    Target target_ = Target::other;
    ArgsKind args_kind_ = ArgsKind::none;
    std::string token_;  // the key or string value being read, with its quotes
    bool escaped_ = false;
    bool args_done_ = false;  // a string or null arguments value was read whole
    std::string key_, name_, args_;
    JsonMinifier args_min_, skip_min_;
    std::string skipped_;  // what skip_min_ passes on (discarded)
};

}  // namespace pagoda::chat
