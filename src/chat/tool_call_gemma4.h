// Gemma 4's tool-call arguments, read as they stream and written out as JSON. Gemma 4 writes a call
// as <|tool_call>call:NAME{key:value,...}<tool_call|>, its arguments in the chat template's own
// notation (format_argument): keys bare, strings between <|"|> markers, numbers, true, false and
// null bare, objects {k:v,...} and arrays [v,...] nested. Gemma4ArgsReader turns that object into
// compact JSON: {"key":value,...}, strings escaped, a bare value that is not a JSON literal or
// number becomes a string. It also takes what a grammar-forced call writes (JSON's "quoted" keys and
// strings), and tolerates white space between tokens and a trailing comma.
// read() takes the text that follows so far and returns how many bytes it consumed: what it cannot
// decide yet (a marker cut short, a bare value without its end, a key) stays unconsumed until more
// text comes or `final`. The JSON is a function of the bytes read alone, so any cuts give the same
// concatenation. A syntax error stops the reader before the offending byte (the arguments keep what
// was read); the object's closing brace completes it. Never throws.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat {

constexpr std::string_view kGemma4CallOpen = "<|tool_call>";
constexpr std::string_view kGemma4CallClose = "<tool_call|>";
constexpr std::string_view kGemma4CallPrefix = "call:";
constexpr std::string_view kGemma4Quote = "<|\"|>";

class Gemma4ArgsReader {
public:
    enum class Status { reading, complete, stopped };
    // Appends the JSON of what it decided to `out`; returns the bytes of `text` consumed.
    size_t read(std::string_view text, bool final, std::string& out);
    Status status() const { return state_ == State::done ? Status::complete : state_ == State::stopped ? Status::stopped : Status::reading; }

private:
    enum class State { open, key_or_end, bare_key, quoted_key, json_key, colon, value, gemma_string, json_string, bare_value,
                       after_value, done, stopped };
    void open(char bracket, std::string& out);
    void close(std::string& out);
    void comma(std::string& out);
    bool emit_key(std::string& out);  // false: the key is not valid

    State state_ = State::open;
    std::vector<char> stack_;  // the open brackets: '{' or '['
    bool owed_comma_ = false;  // a member or element came before: the next one writes ','
    bool escaped_ = false;     // json_string / json_key: the last byte was a backslash
    std::string token_;        // the key or bare value being read
};

}  // namespace pagoda::chat
