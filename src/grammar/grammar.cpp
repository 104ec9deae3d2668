#include "grammar/grammar.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace pagoda::grammar {

bool CharClass::contains(uint32_t cp) const {
    bool in = false;
    for (const CharRange& r : ranges)
        if (cp >= r.lo && cp <= r.hi) {
            in = true;
            break;
        }
    return in != negated;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const CharRange& r : ranges)
            if (r.lo <= hi && r.hi >= lo) return true;
        return false;
    }
    // Some point of [lo, hi] escapes every range: walk the ranges that cover lo upwards.
    uint32_t next = lo;
    bool moved = true;
    while (moved) {
        moved = false;
        for (const CharRange& r : ranges)
            if (r.lo <= next && r.hi >= next) {
                if (r.hi >= hi) return false;
                next = r.hi + 1;
                moved = true;
            }
    }
    return true;
}

namespace {
inline constexpr int kMaxGroupDepth = 256;
}

// Lowers a GrammarSpec: groups and repetitions become helper rules, then everything is checked and
// flattened. A helper for X{0,inf} is `S ::= X S | ()` — right recursion, which the matcher runs
// without growing its stacks — and X{0,n} is a chain `O_n ::= X O_(n-1) | ()`.
class Lowering {
public:
    explicit Lowering(const GrammarSpec& spec) : spec_(spec) {}

    std::shared_ptr<const Grammar> run() {
        for (const SpecRule& r : spec_.rules) {
            if (r.name.empty()) fail("grammar: a rule has an empty name");
            if (!ids_.emplace(r.name, uint32_t(names_.size())).second) fail("grammar: rule '{}' is defined twice", r.name);
            names_.push_back(r.name);
            rules_.emplace_back();
        }
        auto root = ids_.find(spec_.root);
        if (root == ids_.end()) fail("grammar: there is no '{}' rule (the start symbol)", spec_.root);
        for (size_t i = 0; i < spec_.rules.size(); ++i)
            for (const SpecAlternative& alt : spec_.rules[i].alternatives) {
                Sequence s = lower_sequence(alt, uint32_t(i), 0);  // may add rules: index after
                rules_[i].push_back(std::move(s));
            }
        check_left_recursion();
        return flatten(root->second);
    }

private:
    using Sequence = std::vector<Element>;

    void count(size_t n) {
        elements_ += n;
        if (elements_ > kMaxElements) fail("grammar: too large (more than {} elements after expansion)", kMaxElements);
    }

    // A helper is named after its rule and its index ("root-3"); the grammar may already define
    // that name itself ("root-3 ::= ..."), so a taken name gets a further suffix: to_gbnf() must
    // print a grammar whose names are unique. Helpers never enter ids_: a reference to an
    // undefined rule must not resolve to one.
    uint32_t helper(uint32_t parent) {
        std::string name = fmt::format("{}-{}", names_[parent], names_.size());
        for (uint32_t k = 1; ids_.count(name) || helper_names_.count(name); ++k)
            name = fmt::format("{}-{}-{}", names_[parent], names_.size(), k);
        helper_names_.insert(name);
        names_.push_back(std::move(name));
        rules_.emplace_back();
        return uint32_t(rules_.size() - 1);
    }

    Element atom(const SpecItem& item, uint32_t rule, int depth) {
        switch (item.kind) {
            case SpecItem::Kind::chars:
                classes_.push_back(item.chars);
                return {Element::Kind::chars, uint32_t(classes_.size() - 1)};
            case SpecItem::Kind::rule: {
                auto it = ids_.find(item.rule);
                if (it == ids_.end()) fail("grammar: rule '{}' refers to undefined rule '{}'", names_[rule], item.rule);
                return {Element::Kind::rule, it->second};
            }
            case SpecItem::Kind::group: {
                if (depth >= kMaxGroupDepth) fail("grammar: groups nest deeper than {} in rule '{}'", kMaxGroupDepth, names_[rule]);
                const uint32_t g = helper(rule);
                for (const SpecAlternative& alt : item.alternatives) {
                    Sequence s = lower_sequence(alt, rule, depth + 1);
                    rules_[g].push_back(std::move(s));
                }
                return {Element::Kind::rule, g};
            }
        }
        fail("grammar: unknown item kind");
    }

    Sequence lower_sequence(const SpecAlternative& alt, uint32_t rule, int depth) {
        Sequence out;
        for (const SpecItem& item : alt.items) {
            if (item.min > item.max) fail("grammar: repetition {{{},{}}} in rule '{}' has min > max", item.min, item.max, names_[rule]);
            if (item.min > kMaxRepetition || (item.max != kUnbounded && item.max > kMaxRepetition))
                fail("grammar: repetition bound in rule '{}' is above the limit of {}", names_[rule], kMaxRepetition);
            if (item.max == 0) continue;
            const Element x = atom(item, rule, depth);
            count(item.min + 2);
            for (uint32_t i = 0; i < item.min; ++i) out.push_back(x);
            if (item.max == kUnbounded) {
                const uint32_t star = helper(rule);
                rules_[star] = {{x, {Element::Kind::rule, star}}, {}};
                count(3);
                out.push_back({Element::Kind::rule, star});
            } else if (item.max > item.min) {
                uint32_t tail = helper(rule);
                rules_[tail] = {{x}, {}};
                for (uint32_t k = item.min + 1; k < item.max; ++k) {
                    const uint32_t next = helper(rule);
                    rules_[next] = {{x, {Element::Kind::rule, tail}}, {}};
                    tail = next;
                    count(4);
                }
                out.push_back({Element::Kind::rule, tail});
            }
        }
        return out;
    }

    // A rule is left-recursive when it can reach itself through leftmost references, where the
    // references before it in the alternative can all match the empty string.
    void check_left_recursion() {
        const size_t n = rules_.size();
        std::vector<char> nullable(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (const Sequence& s : rules_[r])
                    if (std::all_of(s.begin(), s.end(), [&](const Element& e) {
                            return e.kind == Element::Kind::rule && nullable[e.value];
                        })) {
                        nullable[r] = changed = true;
                        break;
                    }
            }
        }
        std::vector<std::vector<uint32_t>> left(n);
        for (size_t r = 0; r < n; ++r)
            for (const Sequence& s : rules_[r])
                for (const Element& e : s) {
                    if (e.kind != Element::Kind::rule) break;
                    left[r].push_back(e.value);
                    if (!nullable[e.value]) break;
                }
        // Iterative depth-first search for a cycle (colour 1: on the current path).
        std::vector<uint8_t> colour(n, 0);
        for (size_t start = 0; start < n; ++start) {
            if (colour[start]) continue;
            std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
            colour[start] = 1;
            while (!path.empty()) {
                auto& [r, i] = path.back();
                if (i == left[r].size()) {
                    colour[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t next = left[r][i++];
                if (colour[next] == 1)
                    fail("grammar: rule '{}' is left-recursive (it can reach itself without consuming a character; "
                         "a repetition of something that can match nothing also does this)",
                         names_[next]);
                if (colour[next] == 0) {
                    colour[next] = 1;
                    path.push_back({next, 0});
                }
            }
        }
    }

    std::shared_ptr<const Grammar> flatten(uint32_t root) {
        auto g = std::make_shared<Grammar>();
        g->classes_ = std::move(classes_);
        g->names_ = std::move(names_);
        g->root_ = root;
        g->rules_.resize(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            if (rules_[r].empty()) fail("grammar: rule '{}' has no alternatives", g->names_[r]);
            for (const Sequence& s : rules_[r]) {
                g->rules_[r].push_back(uint32_t(g->elements_.size()));
                g->elements_.insert(g->elements_.end(), s.begin(), s.end());
                g->elements_.push_back({Element::Kind::end, 0});
            }
        }
        g->compute_completion();
        return g;
    }

    const GrammarSpec& spec_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::unordered_set<std::string> helper_names_;
    std::vector<std::string> names_;
    std::vector<std::vector<Sequence>> rules_;
    std::vector<CharClass> classes_;
    size_t elements_ = 0;
};

namespace {
void append_class_char(std::string& out, uint32_t c) {
    if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"') out += '\\', out += char(c);
    else if (c >= 0x20 && c < 0x7F) out += char(c);
    else if (c < 0x100) out += fmt::format("\\x{:02X}", c);
    else if (c < 0x10000) out += fmt::format("\\u{:04X}", c);
    else out += fmt::format("\\U{:08X}", c);
}
}  // namespace

namespace {
uint32_t utf8_bytes(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// UTF-8 length of the smallest code point in the class (kNever when it is empty).
uint32_t min_bytes(const CharClass& c) {
    if (!c.negated) {
        uint32_t best = Grammar::kNever;
        for (const CharRange& r : c.ranges) best = std::min(best, utf8_bytes(r.lo));
        return best;
    }
    for (uint32_t lo : {0u, 0x80u, 0x800u, 0x10000u})
        if (c.intersects(lo, lo == 0 ? 0x7F : lo == 0x80 ? 0x7FF : lo == 0x800 ? 0xFFFF : 0x10FFFF)) return utf8_bytes(lo);
    return Grammar::kNever;
}
}  // namespace

// Shortest completions by fixpoint: a rule's is its cheapest alternative's, an alternative's the sum
// of its elements' (saturating at kNever, the mark of a rule that never finishes).
void Grammar::compute_completion() {
    class_min_.resize(classes_.size());
    for (size_t i = 0; i < classes_.size(); ++i) class_min_[i] = min_bytes(classes_[i]);
    std::vector<uint32_t> rule_min(rules_.size(), kNever);
    auto alt_cost = [&](uint32_t pos) {
        uint64_t sum = 0;
        for (; elements_[pos].kind != Element::Kind::end && sum < kNever; ++pos)
            sum += elements_[pos].kind == Element::Kind::chars ? class_min_[elements_[pos].value] : rule_min[elements_[pos].value];
        return uint32_t(std::min<uint64_t>(sum, kNever));
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < rules_.size(); ++r)
            for (uint32_t alt : rules_[r])
                if (uint32_t c = alt_cost(alt); c < rule_min[r]) rule_min[r] = c, changed = true;
    }
    completion_.assign(elements_.size(), 0);
    for (size_t p = elements_.size(); p-- > 0;) {
        const Element& e = elements_[p];
        if (e.kind == Element::Kind::end) continue;
        const uint64_t own = e.kind == Element::Kind::chars ? class_min_[e.value] : rule_min[e.value];
        completion_[p] = uint32_t(std::min<uint64_t>(own + completion_[p + 1], kNever));
    }
}

std::string Grammar::to_gbnf() const {
    std::string out;
    for (uint32_t r = 0; r < n_rules(); ++r) {
        out += names_[r] + " ::=";
        for (size_t a = 0; a < rules_[r].size(); ++a) {
            if (a) out += " |";
            for (uint32_t p = rules_[r][a]; elements_[p].kind != Element::Kind::end; ++p) {
                out += ' ';
                const Element& e = elements_[p];
                if (e.kind == Element::Kind::rule) {
                    out += names_[e.value];
                    continue;
                }
                const CharClass& c = classes_[e.value];
                out += c.negated ? "[^" : "[";
                for (const CharRange& range : c.ranges) {
                    append_class_char(out, range.lo);
                    if (range.hi != range.lo) out += '-', append_class_char(out, range.hi);
                }
                out += ']';
            }
            if (elements_[rules_[r][a]].kind == Element::Kind::end) out += " ()";
        }
        out += '\n';
    }
    return out;
}

std::shared_ptr<const Grammar> Grammar::compile(const GrammarSpec& spec) { return Lowering(spec).run(); }

}  // namespace pagoda::grammar
