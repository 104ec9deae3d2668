// Stop strings over streamed text. feed() takes the next piece of decoded text and returns what may
// be shown now: text up to (not including) the first stop string once one appears, and otherwise
// everything except the longest tail that is still the beginning of some stop string (held back
// until the following text decides it). finish() releases the held tail when generation ends for
// another reason. With may_stop false (min_tokens not reached) no stop string ends the text: one
// complete within it is shown, while a possible beginning is still held back. Stop strings are UTF-8, so a held tail always starts on a character boundary.
#pragma once
#include <string>
#include <vector>

namespace pagoda::engine {

class StopMatcher {
public:
    StopMatcher() = default;
    // include_stop: the text shown ends with the stop string found rather than right before it.
    explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

    struct Result {
        std::string text;      // safe to emit
        bool stopped = false;  // a stop string was found (text ends right before it, or with it)
    };
    Result feed(const std::string& piece, bool may_stop = true);
    std::string finish();  // the held-back tail
    bool stopped() const { return stopped_; }
    const std::string& matched() const { return matched_; }  // the stop string found (empty: none)
    const std::string& held() const { return held_; }

private:
    std::vector<std::string> stops_;
    bool include_stop_ = false;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace pagoda::engine
