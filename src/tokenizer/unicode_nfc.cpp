#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_nfc_tables.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {
namespace {

using namespace unicode;

// Hangul syllables compose and decompose by arithmetic (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
    const CombiningClassRange* end = kCombiningClasses + kCombiningClassCount;
    const CombiningClassRange* it =
        std::upper_bound(kCombiningClasses, end, cp, [](char32_t c, const CombiningClassRange& r) { return c < r.lo; });
    if (it == kCombiningClasses) return 0;
    --it;
    return cp <= it->hi ? it->ccc : 0;
}

const Decomposition* decomposition(char32_t cp) {
    const Decomposition* end = kDecompositions + kDecompositionCount;
    const Decomposition* it =
        std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, char32_t c) { return d.cp < c; });
    return it != end && it->cp == cp ? it : nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const char32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const Decomposition* d = decomposition(cp);
    if (!d) {
        out.push_back(cp);
        return;
    }
    decompose(d->first, out);  // decompositions nest (at most a few levels)
    if (d->second) decompose(d->second, out);
}

// The primary composite of a pair, or 0.
char32_t compose(char32_t a, char32_t b) {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
        return a + (b - kTBase);
    const Composition* end = kCompositions + kCompositionCount;
    const Composition* it = std::lower_bound(kCompositions, end, std::pair<char32_t, char32_t>(a, b),
                                             [](const Composition& c, const std::pair<char32_t, char32_t>& k) {
                                                 return c.first < k.first || (c.first == k.first && c.second < k.second);
                                             });
    return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Canonical decomposition, then canonical ordering: each run of non-starters sorted by class, stably.
std::vector<char32_t> decompose_ordered(const std::vector<char32_t>& in, std::vector<uint8_t>& ccc) {
    std::vector<char32_t> cps;
    cps.reserve(in.size());
    for (char32_t cp : in) decompose(cp, cps);
    ccc.assign(cps.size(), 0);
    for (size_t i = 0; i < cps.size(); ++i) ccc[i] = combining_class(cps[i]);
    for (size_t i = 0; i < cps.size();) {
        if (ccc[i] == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < cps.size() && ccc[j] != 0) ++j;
        std::vector<std::pair<uint8_t, char32_t>> run;
        for (size_t k = i; k < j; ++k) run.emplace_back(ccc[k], cps[k]);
        std::stable_sort(run.begin(), run.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        for (size_t k = i; k < j; ++k) ccc[k] = run[k - i].first, cps[k] = run[k - i].second;
        i = j;
    }
    return cps;
}

// NFC of a run of valid UTF-8.
void nfc_valid(std::string_view text, std::string& out) {
    std::vector<char32_t> in;
    for (size_t pos = 0; pos < text.size();) {
        const DecodedChar c = utf8_decode(text, pos);
        in.push_back(c.codepoint);
        pos += c.length;
    }
    std::vector<uint8_t> ccc;
    const std::vector<char32_t> cps = decompose_ordered(in, ccc);
    // Canonical composition: each character joins the last starter unless a character between them
    // blocks it (one of the same or a higher class, or a starter).
    std::vector<char32_t> result;
    std::vector<uint8_t> result_ccc;
    size_t starter = SIZE_MAX;
    for (size_t i = 0; i < cps.size(); ++i) {
        const char32_t cp = cps[i];
        const uint8_t cls = ccc[i];
        if (starter != SIZE_MAX) {
            const uint8_t last = result_ccc.back();
            const bool blocked = result.size() - 1 != starter && (last == 0 || last >= cls);
            if (!blocked) {
                if (char32_t composite = compose(result[starter], cp)) {
                    result[starter] = composite;
                    continue;
                }
            }
        }
        result.push_back(cp);
        result_ccc.push_back(cls);
        if (cls == 0) starter = result.size() - 1;
    }
    for (char32_t cp : result) utf8_append(out, cp);
}

}  // namespace

std::vector<char32_t> nfd(const std::vector<char32_t>& codepoints) {
    std::vector<uint8_t> ccc;
    return decompose_ordered(codepoints, ccc);
}

bool nfc_trivially_unchanged(std::string_view utf8) {
    // Below U+0300 nothing decomposes except Latin-1 letters, and nothing combines: ASCII is NFC.
    return std::all_of(utf8.begin(), utf8.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string nfc(std::string_view utf8) {
    if (nfc_trivially_unchanged(utf8)) return std::string(utf8);
    std::string out;
    out.reserve(utf8.size());
    size_t run = 0;
    for (size_t pos = 0; pos < utf8.size();) {
        const DecodedChar c = utf8_decode(utf8, pos);
        if (c.codepoint == kInvalidCodepoint) {
            nfc_valid(utf8.substr(run, pos - run), out);
            out.append(utf8.substr(pos, c.length));
            run = pos + c.length;
        }
        pos += c.length;
    }
    nfc_valid(utf8.substr(run), out);
    return out;
}

}  // namespace pagoda::tokenizer
