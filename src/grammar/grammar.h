// A context-free grammar over Unicode code points, in two forms.
//   GrammarSpec: what parsers build — named rules, each a list of alternatives, each a sequence of
//     items (a character class, a reference to a rule, or a parenthesised group of alternatives),
//     every item with a repetition count {min, max}.
//   Grammar: the compiled form the matcher walks — groups and repetitions lowered into helper rules,
//     every alternative a run of elements (character class or rule reference) closed by an `end`
//     element in one flat array, so a matcher position is a single index.
// Grammar::compile() refuses (pagoda::Error naming the rule) undefined references, a missing root,
// left recursion (a rule that can reach itself without consuming a character, which would make the
// matcher loop), and grammars beyond the size limits; a compiled Grammar is immutable and shared.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace pagoda::grammar {

struct CharRange {
    uint32_t lo = 0, hi = 0;  // inclusive code points
};

// A set of code points: the union of `ranges`, or its complement when `negated`.
struct CharClass {
    std::vector<CharRange> ranges;
    bool negated = false;

    bool contains(uint32_t cp) const;
    bool intersects(uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi] is in the set
    static CharClass single(uint32_t cp) { return CharClass{{{cp, cp}}, false}; }
};

inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

struct SpecAlternative;

struct SpecItem {
    enum class Kind { chars, rule, group } kind = Kind::chars;
    CharClass chars;                           // kind chars
    std::string rule;                          // kind rule
    std::vector<SpecAlternative> alternatives; // kind group
    uint32_t min = 1, max = 1;                 // repetition; max may be kUnbounded
};

struct SpecAlternative {
    std::vector<SpecItem> items;  // empty: matches the empty string
};

struct SpecRule {
    std::string name;
    std::vector<SpecAlternative> alternatives;
};

struct GrammarSpec {
    std::vector<SpecRule> rules;  // names unique
    std::string root = "root";
};

struct Element {
    enum class Kind : uint8_t { chars, rule, end } kind = Kind::end;
    uint32_t value = 0;  // chars: index into classes(); rule: rule id
};

// Bounds that keep a hostile grammar's compile and match work finite.
inline constexpr size_t kMaxElements = 1 << 20;
inline constexpr uint32_t kMaxRepetition = 10000;  // largest finite {m,n} bound

class Grammar {
public:
    static std::shared_ptr<const Grammar> compile(const GrammarSpec& spec);

    const std::vector<Element>& elements() const { return elements_; }
    const Element& element(uint32_t pos) const { return elements_[pos]; }
    const CharClass& char_class(uint32_t id) const { return classes_[id]; }
    // Positions of the first element of each alternative of `rule`.
    const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
    const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
    uint32_t n_rules() const { return uint32_t(rules_.size()); }
    uint32_t root() const { return root_; }
    // The fewest bytes that complete the alternative from `pos` on (kNever: no finite completion).
    uint32_t completion_bytes(uint32_t pos) const { return completion_[pos]; }
    uint32_t class_min_bytes(uint32_t class_id) const { return class_min_[class_id]; }
    static constexpr uint32_t kNever = 1u << 30;
    // Every rule in GBNF, one a line, each element a class `[...]` or a rule name (for tests and
    // debugging: parsing the text again gives the same language).
    std::string to_gbnf() const;

private:
    friend class Lowering;
    std::vector<Element> elements_;
    std::vector<CharClass> classes_;
    std::vector<std::vector<uint32_t>> rules_;
    std::vector<std::string> names_;
    std::vector<uint32_t> completion_, class_min_;
    uint32_t root_ = 0;

    void compute_completion();
};

}  // namespace pagoda::grammar
