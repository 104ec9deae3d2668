#include "grammar/reasoning_prefix.h"

#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::grammar {
namespace {

SpecItem chars(CharClass c) {
    SpecItem it;
    it.kind = SpecItem::Kind::chars;
    it.chars = std::move(c);
    return it;
}

SpecItem ref(std::string name) {
    SpecItem it;
    it.kind = SpecItem::Kind::rule;
    it.rule = std::move(name);
    return it;
}

SpecAlternative literal(const std::string& text) {
    SpecAlternative a;
    for (unsigned char c : text) a.items.push_back(chars(CharClass::single(c)));
    return a;
}

// KMP: the length of the longest prefix of `tag` that is a suffix of tag[0, matched) + c.
size_t next_state(const std::string& tag, size_t matched, char c) {
    std::string s = tag.substr(0, matched) + c;
    for (size_t k = std::min(s.size(), tag.size()); k > 0; --k)
        if (s.compare(s.size() - k, k, tag, 0, k) == 0) return k;
    return 0;
}

// Rules "think-body-<i>" (i: how much of `close` the text so far ends with) matching any text
// that does not contain `close`, then `close` itself: the first occurrence of the tag ends the
// block. The tag is ASCII, so every other code point simply restarts the match. Right recursion:
// the matcher runs a rule reference in tail position without growing its stack.
void add_body(GrammarSpec& spec, const std::string& close) {
    const std::set<unsigned char> tag_bytes(close.begin(), close.end());
    auto name = [](size_t i) { return fmt::format("think-body-{}", i); };
    for (size_t i = 0; i < close.size(); ++i) {
        SpecRule r;
        r.name = name(i);
        CharClass other;
        other.negated = true;
        for (unsigned char b : tag_bytes) other.ranges.push_back({b, b});
        r.alternatives.push_back(SpecAlternative{{chars(other), ref(name(0))}});
        for (unsigned char b : tag_bytes) {
            const size_t next = next_state(close, i, char(b));
            if (next == close.size()) r.alternatives.push_back(SpecAlternative{{chars(CharClass::single(b))}});  // closed
            else r.alternatives.push_back(SpecAlternative{{chars(CharClass::single(b)), ref(name(next))}});
        }
        spec.rules.push_back(std::move(r));
    }
}

}  // namespace

GrammarSpec spec_of(const Grammar& g, const std::string& prefix) {
    GrammarSpec spec;
    spec.root = prefix + g.rule_name(g.root());
    for (uint32_t r = 0; r < g.n_rules(); ++r) {
        SpecRule rule;
        rule.name = prefix + g.rule_name(r);
        for (uint32_t pos : g.alternatives(r)) {
            SpecAlternative alt;
            for (; g.element(pos).kind != Element::Kind::end; ++pos) {
                const Element& e = g.element(pos);
                if (e.kind == Element::Kind::chars) alt.items.push_back(chars(g.char_class(e.value)));
                else alt.items.push_back(ref(prefix + g.rule_name(e.value)));
            }
            rule.alternatives.push_back(std::move(alt));
        }
        spec.rules.push_back(std::move(rule));
    }
    return spec;
}

std::shared_ptr<const Grammar> with_reasoning_prefix(const Grammar& answer, const ReasoningTags& tags, bool starts_open) {
    if (tags.open.empty() || tags.close.empty()) fail("a reasoning block needs an opening and a closing tag");
    for (unsigned char c : tags.open + tags.close + tags.after_close + tags.answer_open)
        if (c >= 0x80) fail("reasoning tags must be ASCII ('{}' … '{}')", tags.open, tags.close);
    GrammarSpec spec = spec_of(answer, "answer-");
    const std::string answer_root = spec.root;
    add_body(spec, tags.close);
    // White space after the closing tag, as models write it (the reasoning splitter drops it).
    SpecRule gap;
    gap.name = "think-gap";
    {
        SpecItem ws = chars(CharClass{{{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}, false});
        ws.min = 0;
        ws.max = 4;
        gap.alternatives.push_back(SpecAlternative{{ws}});
    }
    spec.rules.push_back(std::move(gap));
    SpecRule root;
    root.name = "think-root";
    SpecAlternative thought = starts_open ? SpecAlternative{} : literal(tags.open);
    thought.items.push_back(ref("think-body-0"));  // the body and the closing tag
    if (tags.after_close.empty()) thought.items.push_back(ref("think-gap"));
    SpecAlternative opening = literal(tags.after_close + tags.answer_open);
    thought.items.insert(thought.items.end(), opening.items.begin(), opening.items.end());
    thought.items.push_back(ref(answer_root));
    root.alternatives.push_back(std::move(thought));
    if (!starts_open) {
        SpecAlternative direct = literal(tags.answer_open);
        direct.items.push_back(ref(answer_root));
        root.alternatives.push_back(std::move(direct));
    }
    spec.rules.push_back(std::move(root));
    spec.root = "think-root";
    return Grammar::compile(spec);
}

}  // namespace pagoda::grammar
