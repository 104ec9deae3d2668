#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::grammar {
namespace {

// Expansion works on one scratch stack per recursion level, reused across calls so the hot path
// (a mask walk visits every live trie node) allocates nothing once warm.
struct Expander {
    const Grammar& g;
    MatchState& out;
    std::vector<std::vector<uint32_t>>& pool;

    void add(const std::vector<uint32_t>& stack) {
        if (stack.size() > kMaxStackDepth) return;  // deeper nesting than we follow: not a path
        uint32_t begin = 0;
        for (uint32_t end : out.ends) {
            if (end - begin == stack.size() && std::equal(stack.begin(), stack.end(), out.cells.begin() + begin)) return;
            begin = end;
        }
        if (out.ends.size() >= kMaxStacks)
            fail("grammar: more than {} ways to continue at once (the grammar is too ambiguous)", kMaxStacks);
        out.cells.insert(out.cells.end(), stack.begin(), stack.end());
        out.ends.push_back(uint32_t(out.cells.size()));
    }

    static void push(std::vector<uint32_t>& stack, const Grammar& g, uint32_t pos) {
        if (g.element(pos).kind != Element::Kind::end) stack.push_back(pos);
    }

    // Expands pool[level] until every stack's top is a character class (or the stack is empty).
    void expand(size_t level) {
        std::vector<uint32_t>& stack = pool[level];
        if (stack.empty()) {
            out.complete = true;
            return;
        }
        // Chains of single-reference rules expand without growing the stack; bound them too.
        if (stack.size() > kMaxStackDepth || level > 4 * kMaxStackDepth) return;
        const uint32_t pos = stack.back();
        const Element& e = g.element(pos);
        if (e.kind == Element::Kind::chars) {
            add(stack);
            return;
        }
        stack.pop_back();
        push(stack, g, pos + 1);  // where to go on once the referenced rule is done
        if (pool.size() <= level + 1) pool.resize(level + 2);
        for (uint32_t alt : g.alternatives(e.value)) {
            std::vector<uint32_t>& child = pool[level + 1];
            child.assign(pool[level].begin(), pool[level].end());
            push(child, g, alt);
            expand(level + 1);
        }
    }
};

thread_local std::vector<std::vector<uint32_t>> t_pool(4);

void advance_codepoint(const Grammar& g, const MatchState& in, uint32_t cp, MatchState& out) {
    out.cells.clear();
    out.ends.clear();
    out.complete = false;
    out.partial = 0;
    out.need = out.length = 0;
    Expander x{g, out, t_pool};
    uint32_t begin = 0;
    for (uint32_t end : in.ends) {
        const uint32_t top = in.cells[end - 1];
        if (g.char_class(g.element(top).value).contains(cp)) {
            std::vector<uint32_t>& s = t_pool[0];
            s.assign(in.cells.begin() + begin, in.cells.begin() + end - 1);
            Expander::push(s, g, top + 1);
            x.expand(0);
        }
        begin = end;
    }
}

// The stacks of `in` that can take a character begun with `bits`, `need` continuation bytes still to
// come (of `length` bytes in all), copied into `out`; false when there are none. The code points it
// can become are an interval, clipped to what that length may encode (no overlong forms, nothing
// past U+10FFFF); one made only of surrogates can become none.
bool keep_stacks_for_partial(const Grammar& g, const MatchState& in, uint32_t bits, uint8_t need, uint8_t length,
                             MatchState& out) {
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lo = bits << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    lo = std::max(lo, kMin[length]);
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    out.cells.clear();
    out.ends.clear();
    uint32_t begin = 0;
    for (uint32_t end : in.ends) {
        if (g.char_class(g.element(in.cells[end - 1]).value).intersects(lo, hi)) {
            out.cells.insert(out.cells.end(), in.cells.begin() + begin, in.cells.begin() + end);
            out.ends.push_back(uint32_t(out.cells.size()));
        }
        begin = end;
    }
    out.complete = false;
    out.partial = bits;
    out.need = need;
    out.length = length;
    return !out.ends.empty();
}

}  // namespace

size_t MatchState::hash() const {
    uint64_t h = 1469598103934665603ull ^ (uint64_t(partial) << 8) ^ need ^ (uint64_t(complete) << 40);
    for (uint32_t c : cells) h = (h ^ c) * 1099511628211ull;
    for (uint32_t e : ends) h = (h ^ (e + 0x9E3779B9u)) * 1099511628211ull;
    return size_t(h);
}

MatchState initial_state(const Grammar& g) {
    MatchState s;
    Expander x{g, s, t_pool};
    // The root is entered through a synthetic reference: expand its alternatives directly.
    for (uint32_t alt : g.alternatives(g.root())) {
        t_pool[0].clear();
        Expander::push(t_pool[0], g, alt);
        x.expand(0);
    }
    return s;
}

bool advance_byte(const Grammar& g, const MatchState& in, uint8_t b, MatchState& out) {
    if (in.need == 0) {
        if (b < 0x80) {
            advance_codepoint(g, in, b, out);
            return out.complete || !out.ends.empty();
        }
        uint8_t need;
        uint32_t bits;
        if (b >= 0xC2 && b <= 0xDF) need = 1, bits = b & 0x1Fu;
        else if (b >= 0xE0 && b <= 0xEF) need = 2, bits = b & 0x0Fu;
        else if (b >= 0xF0 && b <= 0xF4) need = 3, bits = b & 0x07u;
        else return false;
        return keep_stacks_for_partial(g, in, bits, need, uint8_t(need + 1), out);
    }
    if ((b & 0xC0) != 0x80) return false;
    const uint32_t bits = (in.partial << 6) | (b & 0x3Fu);
    const uint8_t need = uint8_t(in.need - 1);
    if (need > 0) {
        return keep_stacks_for_partial(g, in, bits, need, in.length, out);
    }
    // Overlong forms, surrogates and values beyond U+10FFFF are not characters.
    if ((in.length == 3 && bits < 0x800) || (in.length == 4 && (bits < 0x10000 || bits > 0x10FFFF)) ||
        (bits >= 0xD800 && bits <= 0xDFFF))
        return false;
    advance_codepoint(g, in, bits, out);
    return out.complete || !out.ends.empty();
}

uint32_t completion_bytes(const Grammar& g, const MatchState& s) {
    if (s.can_end()) return 0;
    uint64_t best = Grammar::kNever;
    uint32_t begin = 0;
    for (uint32_t end : s.ends) {
        uint64_t sum = 0;
        for (uint32_t i = begin; i < end; ++i) sum += g.completion_bytes(s.cells[i]);
        if (s.need > 0) {
            // Inside a character: its remaining bytes instead of the class's shortest character.
            const Element& top = g.element(s.cells[end - 1]);
            sum = sum - g.class_min_bytes(top.value) + s.need;
        }
        best = std::min(best, sum);
        begin = end;
    }
    return uint32_t(std::min<uint64_t>(best, Grammar::kNever));
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
    if (!grammar_) fail("grammar matcher: no grammar");
    state_ = initial_state(*grammar_);
}

bool Matcher::accept(std::string_view bytes) {
    MatchState next = state_;
    for (char c : bytes) {
        if (!advance_byte(*grammar_, next, uint8_t(c), scratch_)) return false;
        std::swap(next, scratch_);
    }
    state_ = std::move(next);
    return true;
}

}  // namespace pagoda::grammar
