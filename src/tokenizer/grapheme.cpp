#include "tokenizer/grapheme.h"

#include <algorithm>

#include "tokenizer/unicode_props_tables.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

using namespace unicode;

enum Gbp : uint8_t { Other = 0, CR, LF, Control, Extend, ZWJ, RI, Prepend, SpacingMark, L, V, T, LV, LVT };

Gbp property(char32_t cp) {
    const ClassRange* end = kGraphemeBreak + kGraphemeBreakCount;
    const ClassRange* it = std::upper_bound(kGraphemeBreak, end, cp, [](char32_t c, const ClassRange& r) { return c < r.lo; });
    if (it == kGraphemeBreak || cp > (it - 1)->hi) return Other;
    return Gbp((it - 1)->cls);
}

bool pictographic(char32_t cp) {
    const CodeRange* end = kExtendedPictographic + kExtendedPictographicCount;
    const CodeRange* it =
        std::upper_bound(kExtendedPictographic, end, cp, [](char32_t c, const CodeRange& r) { return c < r.lo; });
    return it != kExtendedPictographic && cp <= (it - 1)->hi;
}

}  // namespace

size_t grapheme_end(std::string_view text, size_t pos) {
    DecodedChar c = utf8_decode(text, pos);
    if (c.codepoint == kInvalidCodepoint) return pos + c.length;
    Gbp prev = property(c.codepoint);
    // GB11's state: an Extended_Pictographic then Extend* (then a ZWJ); GB12/13's: regional indicators so far.
    bool pict_run = pictographic(c.codepoint);
    bool pict_zwj = false;
    int ri_count = prev == RI ? 1 : 0;
    size_t at = pos + c.length;
    while (at < text.size()) {
        c = utf8_decode(text, at);
        if (c.codepoint == kInvalidCodepoint) break;
        const Gbp cur = property(c.codepoint);
        const bool cur_pict = pictographic(c.codepoint);
        bool join;
        if (prev == CR && cur == LF) join = true;                                               // GB3
        else if (prev == CR || prev == LF || prev == Control) join = false;                     // GB4
        else if (cur == CR || cur == LF || cur == Control) join = false;                        // GB5
        else if (prev == L && (cur == L || cur == V || cur == LV || cur == LVT)) join = true;   // GB6
        else if ((prev == LV || prev == V) && (cur == V || cur == T)) join = true;              // GB7
        else if ((prev == LVT || prev == T) && cur == T) join = true;                           // GB8
        else if (cur == Extend || cur == ZWJ) join = true;                                      // GB9
        else if (cur == SpacingMark) join = true;                                               // GB9a
        else if (prev == Prepend) join = true;                                                  // GB9b
        else if (pict_zwj && cur_pict) join = true;                                             // GB11
        else if (prev == RI && cur == RI) join = ri_count % 2 == 1;                             // GB12/13
        else join = false;                                                                      // GB999
        if (!join) break;
        // Track GB11 (ExtPict Extend* ZWJ × ExtPict) and the regional-indicator count.
        if (cur_pict) {
            pict_run = true, pict_zwj = false;
        } else if (cur == Extend && pict_run && !pict_zwj) {
        } else if (cur == ZWJ && pict_run && !pict_zwj) {
            pict_zwj = true;
        } else {
            pict_run = pict_zwj = false;
        }
        ri_count = cur == RI ? ri_count + 1 : 0;
        prev = cur;
        at += c.length;
    }
    return at;
}

}  // namespace pagoda::tokenizer
