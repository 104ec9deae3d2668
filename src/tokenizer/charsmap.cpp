#include "tokenizer/charsmap.h"

#include <cstring>
#include <deque>

#include "core/error.h"
#include "tokenizer/grapheme.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

// darts-clone's unit layout: label in bits 0-7 (bit 31 set on value units), has_leaf in bit 8, offset
// in bits 10-30 (shifted left by 8 more when bit 9 is set), value in bits 0-30 of a value unit.
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFFu); }
bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1u; }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

uint32_t read_u32(std::string_view s, size_t at) {
    return uint32_t(uint8_t(s[at])) | uint32_t(uint8_t(s[at + 1])) << 8 | uint32_t(uint8_t(s[at + 2])) << 16 |
           uint32_t(uint8_t(s[at + 3])) << 24;
}

}  // namespace

Charsmap::Charsmap(std::string blob) : blob_(std::move(blob)) {
    if (blob_.size() < 4) fail("precompiled charsmap is {} bytes, shorter than its 4-byte header", blob_.size());
    const uint32_t trie_bytes = read_u32(blob_, 0);
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob_.size() - 4)
        fail("precompiled charsmap: its double array size {} does not fit the {}-byte blob (or is not a multiple of 4)",
             trie_bytes, blob_.size());
    units_.resize(trie_bytes / 4);
    for (size_t i = 0; i < units_.size(); ++i) units_[i] = read_u32(blob_, 4 + 4 * i);
    replacements_ = std::string_view(blob_).substr(4 + trie_bytes);
    // Hugging Face refuses a blob whose strings are not UTF-8 too; it keeps the output valid UTF-8.
    if (!utf8_valid(replacements_)) fail("precompiled charsmap: its replacement strings are not valid UTF-8");
}

uint32_t Charsmap::unit(size_t index) const {
    if (index >= units_.size()) fail("precompiled charsmap: the double array points past its end (unit {})", index);
    return units_[index];
}

std::string_view Charsmap::replacement(uint32_t value) const {
    if (value >= replacements_.size())
        fail("precompiled charsmap: a replacement offset ({}) points past the strings ({} bytes)", value, replacements_.size());
    if ((static_cast<uint8_t>(replacements_[value]) & 0xC0) == 0x80)
        fail("precompiled charsmap: a replacement offset ({}) points inside a UTF-8 character", value);
    const size_t end = replacements_.find('\0', value);
    if (end == std::string_view::npos) fail("precompiled charsmap: a replacement string is not NUL-terminated");
    return replacements_.substr(value, end - value);
}

std::pair<std::string_view, size_t> Charsmap::match(std::string_view text, bool longest) const {
    size_t length = 0;
    uint32_t value = 0;
    size_t node = unit_offset(unit(0));
    for (size_t i = 0; i < text.size(); ++i) {
        const uint8_t c = static_cast<uint8_t>(text[i]);
        if (c == 0) break;
        node ^= c;
        if (node >= units_.size()) break;  // no such child (darts-clone's own arrays never end here)
        const uint32_t u = units_[node];
        if (unit_label(u) != c) break;
        node ^= unit_offset(u);
        if (unit_has_leaf(u)) {
            length = i + 1;
            value = unit_value(unit(node));
            if (!longest) break;
        }
    }
    if (length == 0) return {{}, 0};
    return {replacement(value), length};
}

std::string Charsmap::normalize(std::string_view text) const {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        auto [repl, length] = match(text.substr(pos), true);
        if (length > 0) {
            out.append(repl);
            pos += length;
            continue;
        }
        const DecodedChar c = utf8_decode(text, pos);
        if (c.codepoint == kInvalidCodepoint)
            out.append("\xEF\xBF\xBD");
        else
            out.append(text.substr(pos, c.length));
        pos += c.length;
    }
    return out;
}

std::string Charsmap::normalize_graphemes(std::string_view text) const {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = grapheme_end(text, pos);
        const std::string_view cluster = text.substr(pos, end - pos);
        pos = end;
        if (cluster.size() < 6) {
            if (auto [repl, length] = match(cluster, false); length > 0) {
                out.append(repl);  // the whole cluster, whatever the key's length
                continue;
            }
        }
        for (size_t at = 0; at < cluster.size();) {
            const DecodedChar c = utf8_decode(cluster, at);
            const std::string_view ch = cluster.substr(at, c.length);
            at += c.length;
            if (c.codepoint == kInvalidCodepoint) {
                out.append("\xEF\xBF\xBD");
            } else if (auto [repl, length] = match(ch, false); length > 0) {
                out.append(repl);
            } else {
                out.append(ch);
            }
        }
    }
    return out;
}

std::string build_charsmap(const std::map<std::string, std::string>& rules) {
    // The trie of the keys; node 0 is the root.
    struct Node {
        std::map<uint8_t, size_t> children;
        int64_t value = -1;  // offset of the replacement, when a key ends here
    };
    std::vector<Node> nodes(1);
    std::string strings;
    for (const auto& [key, replacement] : rules) {
        if (key.empty() || key.find('\0') != std::string::npos || replacement.find('\0') != std::string::npos)
            fail("charsmap rule '{}': keys must be non-empty and neither may hold a NUL byte", key);
        size_t n = 0;
        for (char ch : key) {
            const uint8_t c = static_cast<uint8_t>(ch);
            auto it = nodes[n].children.find(c);
            if (it == nodes[n].children.end()) {
                nodes.push_back({});
                it = nodes[n].children.emplace(c, nodes.size() - 1).first;
            }
            n = it->second;
        }
        nodes[n].value = static_cast<int64_t>(strings.size());
        strings += replacement;
        strings += '\0';
    }
    // Place each node's children at base ^ label (the leaf value at base ^ 0), first fit.
    std::vector<uint32_t> units(256, 0);
    std::vector<bool> used(256, false), base_used(256, false);
    used[0] = true;
    auto grow = [&](size_t n) {
        if (n > units.size()) units.resize(n, 0), used.resize(n, false), base_used.resize(n, false);
    };
    auto encode_offset = [](uint32_t offset) -> uint32_t {
        if (offset >= (1u << 21)) fail("charsmap too large for this builder");
        return offset << 10;
    };
    std::deque<std::pair<size_t, size_t>> queue{{0, 0}};  // (trie node, its unit index)
    while (!queue.empty()) {
        auto [n, at] = queue.front();
        queue.pop_front();
        std::vector<uint32_t> labels;
        if (nodes[n].value >= 0) labels.push_back(0);
        for (const auto& [c, child] : nodes[n].children) labels.push_back(c);
        if (labels.empty()) continue;
        size_t base = 1;
        for (;; ++base) {
            grow((base | 0xFF) + 1);
            if (base_used[base]) continue;
            bool free = true;
            for (uint32_t c : labels) free = free && !used[base ^ c];
            if (free) break;
        }
        base_used[base] = true;
        for (uint32_t c : labels) used[base ^ c] = true;
        units[at] |= encode_offset(static_cast<uint32_t>(at ^ base));
        if (nodes[n].value >= 0) units[base] = (1u << 31) | static_cast<uint32_t>(nodes[n].value);
        for (const auto& [c, child] : nodes[n].children) {
            const size_t slot = base ^ c;
            units[slot] = c;
            if (nodes[child].value >= 0) units[slot] |= 1u << 8;
            queue.emplace_back(child, slot);
        }
    }
    std::string blob(4, '\0');
    const uint32_t bytes = static_cast<uint32_t>(units.size() * 4);
    for (int i = 0; i < 4; ++i) blob[i] = static_cast<char>((bytes >> (8 * i)) & 0xFF);
    for (uint32_t u : units)
        for (int i = 0; i < 4; ++i) blob += static_cast<char>((u >> (8 * i)) & 0xFF);
    return blob + strings;
}

}  // namespace pagoda::tokenizer
