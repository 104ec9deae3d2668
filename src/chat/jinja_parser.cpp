#include "chat/jinja_parser.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"
#include "core/error.h"

namespace pagoda::chat::jinja {

namespace {

constexpr int kMaxNesting = 200;  // deep enough for any real template, shallow enough for the stack

class Parser {
public:
    explicit Parser(LexedTemplate lexed) : lexed_(std::move(lexed)), tokens_(lexed_.tokens) {}

    std::shared_ptr<const Program> run() {
        auto program = std::make_shared<Program>();
        program->body = parse_body({});
        program->source = lexed_.source;
        return program;
    }

private:
    LexedTemplate lexed_;
    const std::vector<Token>& tokens_;
    std::size_t pos_ = 0;
    int depth_ = 0;

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) p.error(p.cur().offset, "expression or block nesting is too deep");
        }
        ~DepthGuard() { --p.depth_; }
    };

    [[noreturn]] void error(std::size_t offset, const std::string& what) const {
        fail("chat template syntax error at {}: {}", describe_position(lexed_.source, offset), what);
    }

    const Token& cur() const { return tokens_[pos_]; }
    const Token& peek(std::size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
    void advance() { if (pos_ + 1 < tokens_.size()) ++pos_; }

    bool is_op(const char* op) const { return cur().type == TokenType::op && cur().value == op; }
    bool is_name(const char* name) const { return cur().type == TokenType::name && cur().value == name; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        advance();
        return true;
    }
    bool skip_name(const char* name) {
        if (!is_name(name)) return false;
        advance();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::text: return "text";
            case TokenType::variable_begin: return "'{{'";
            case TokenType::variable_end: return "'}}'";
            case TokenType::block_begin: return "'{%'";
            case TokenType::block_end: return "'%}'";
            case TokenType::name: return "'" + t.value + "'";
            case TokenType::string: return "string literal";
            case TokenType::integer:
            case TokenType::floating: return "number " + t.value;
            case TokenType::op: return "'" + t.value + "'";
            case TokenType::eof: return "end of template";
        }
        return "token";
    }

    void expect_op(const char* op) {
        if (!skip_op(op)) error(cur().offset, fmt::format("expected '{}', got {}", op, describe(cur())));
    }
    std::string expect_name(const char* what) {
        if (cur().type != TokenType::name) error(cur().offset, fmt::format("expected {}, got {}", what, describe(cur())));
        std::string name = cur().value;
        advance();
        return name;
    }
    void expect_block_end() {
        if (cur().type != TokenType::block_end) error(cur().offset, fmt::format("expected '%}}', got {}", describe(cur())));
        advance();
    }

    // ---- statements ----------------------------------------------------------------------------

    // Parses until a `{% tag %}` whose name is in `end_tags`; leaves the cursor on that name.
    Body parse_body(const std::set<std::string>& end_tags) {
        DepthGuard guard(*this);
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.type == TokenType::eof) {
                if (!end_tags.empty())
                    error(t.offset, fmt::format("unexpected end of template, expected '{}'", *end_tags.begin()));
                return body;
            }
            if (t.type == TokenType::text) {
                body.push_back(std::make_unique<TextStmt>(t.offset, t.value));
                advance();
            } else if (t.type == TokenType::variable_begin) {
                advance();
                auto expr = parse_tuple(true);
                if (cur().type != TokenType::variable_end)
                    error(cur().offset, fmt::format("expected '}}}}', got {}", describe(cur())));
                advance();
                body.push_back(std::make_unique<OutputStmt>(t.offset, std::move(expr)));
            } else if (t.type == TokenType::block_begin) {
                const Token& tag = peek();
                if (tag.type != TokenType::name) error(tag.offset, "expected a tag name after '{%'");
                if (end_tags.count(tag.value)) {
                    advance();
                    return body;
                }
                advance();
                body.push_back(parse_statement());
            } else {
                error(t.offset, fmt::format("unexpected {}", describe(t)));
            }
        }
    }

    StmtPtr parse_statement() {
        const Token& tag = cur();
        const std::size_t off = tag.offset;
        const std::string name = tag.value;
        advance();
        if (name == "if") return parse_if(off);
        if (name == "for") return parse_for(off);
        if (name == "set") return parse_set(off);
        if (name == "macro") return parse_macro(off);
        if (name == "filter") return parse_filter_block(off);
        if (name == "break" || name == "continue") {
            expect_block_end();
            return std::make_unique<LoopControlStmt>(off, name == "break" ? Flow::break_loop : Flow::continue_loop);
        }
        if (name == "generation") {
            expect_block_end();
            auto stmt = std::make_unique<PassThroughStmt>(off);
            stmt->body = parse_body({"endgeneration"});
            advance();
            expect_block_end();
            return stmt;
        }
        static const std::set<std::string> misplaced = {"elif", "else", "endif", "endfor", "endset", "endmacro",
                                                        "endfilter", "endgeneration", "endraw"};
        if (misplaced.count(name)) error(off, fmt::format("unexpected '{}' tag", name));
        error(off, fmt::format("unknown or unsupported tag '{}'", name));
    }

    StmtPtr parse_if(std::size_t off) {
        auto stmt = std::make_unique<IfStmt>(off);
        auto cond = parse_tuple(false);
        expect_block_end();
        while (true) {
            Body body = parse_body({"elif", "else", "endif"});
            stmt->branches.emplace_back(std::move(cond), std::move(body));
            const std::string tag = cur().value;
            advance();
            if (tag == "elif") {
                cond = parse_tuple(false);
                expect_block_end();
                continue;
            }
            if (tag == "else") {
                expect_block_end();
                stmt->else_body = parse_body({"endif"});
                advance();
            }
            expect_block_end();
            return stmt;
        }
    }

    StmtPtr parse_for(std::size_t off) {
        auto stmt = std::make_unique<ForStmt>(off);
        const bool paren = skip_op("(");
        do {
            stmt->targets.push_back(expect_name("a loop variable name"));
        } while (skip_op(","));
        if (paren) expect_op(")");
        if (!skip_name("in")) error(cur().offset, fmt::format("expected 'in', got {}", describe(cur())));
        stmt->iterable = parse_or();
        if (is_op(",")) error(cur().offset, "iterating over an implicit tuple is not supported; use [a, b]");
        if (skip_name("if")) stmt->filter = parse_or();
        if (is_name("recursive")) error(cur().offset, "recursive for loops are not supported");
        expect_block_end();
        stmt->body = parse_body({"else", "endfor"});
        if (cur().value == "else") {
            advance();
            expect_block_end();
            stmt->else_body = parse_body({"endfor"});
        }
        advance();
        expect_block_end();
        return stmt;
    }

    StmtPtr parse_set(std::size_t off) {
        std::string first = expect_name("a variable name");
        if (skip_op(".")) {
            auto stmt = std::make_unique<SetStmt>(off);
            stmt->targets.push_back(first);
            stmt->attribute = expect_name("an attribute name");
            expect_op("=");
            stmt->value = parse_tuple(true);
            expect_block_end();
            return stmt;
        }
        if (cur().type == TokenType::block_end) {
            advance();
            auto stmt = std::make_unique<SetBlockStmt>(off);
            stmt->target = first;
            stmt->body = parse_body({"endset"});
            advance();
            expect_block_end();
            return stmt;
        }
        auto stmt = std::make_unique<SetStmt>(off);
        stmt->targets.push_back(first);
        while (skip_op(",")) stmt->targets.push_back(expect_name("a variable name"));
        expect_op("=");
        stmt->value = parse_tuple(true);
        expect_block_end();
        return stmt;
    }

    StmtPtr parse_macro(std::size_t off) {
        auto stmt = std::make_unique<MacroStmt>(off);
        stmt->name = expect_name("a macro name");
        expect_op("(");
        bool seen_default = false;
        while (!is_op(")")) {
            if (!stmt->params.empty()) expect_op(",");
            if (is_op(")")) break;
            MacroParam param;
            const std::size_t at = cur().offset;
            param.name = expect_name("a parameter name");
            if (skip_op("=")) {
                param.default_value = parse_expression();
                seen_default = true;
            } else if (seen_default) {
                error(at, "non-default argument follows default argument");
            }
            stmt->params.push_back(std::move(param));
        }
        advance();
        expect_block_end();
        stmt->body = parse_body({"endmacro"});
        advance();
        if (cur().type == TokenType::name) advance();  // `{% endmacro name %}`
        expect_block_end();
        return stmt;
    }

    StmtPtr parse_filter_block(std::size_t off) {
        auto stmt = std::make_unique<FilterBlockStmt>(off);
        stmt->filter = parse_filter_call(nullptr, cur().offset);
        expect_block_end();
        stmt->body = parse_body({"endfilter"});
        advance();
        expect_block_end();
        return stmt;
    }

    // ---- expressions ---------------------------------------------------------------------------

    // expression (',' expression)* — a bare comma list is a tuple.
    ExprPtr parse_tuple(bool allow_implicit) {
        const std::size_t off = cur().offset;
        auto first = parse_expression();
        if (!allow_implicit || !is_op(",")) return first;
        auto list = std::make_unique<ListExpr>(off, true);
        list->items.push_back(std::move(first));
        while (skip_op(",")) {
            if (cur().type == TokenType::variable_end || cur().type == TokenType::block_end) break;
            list->items.push_back(parse_expression());
        }
        return list;
    }

    ExprPtr parse_expression() {
        DepthGuard guard(*this);
        const std::size_t off = cur().offset;
        auto expr = parse_or();
        while (skip_name("if")) {
            auto cond = std::make_unique<CondExpr>(off);
            cond->then_value = std::move(expr);
            cond->condition = parse_or();
            if (skip_name("else")) cond->else_value = parse_expression();
            expr = std::move(cond);
        }
        return expr;
    }

    ExprPtr parse_or() {
        auto left = parse_and();
        while (is_name("or")) {
            const std::size_t off = cur().offset;
            advance();
            left = std::make_unique<BinaryExpr>(off, "or", std::move(left), parse_and());
        }
        return left;
    }

    ExprPtr parse_and() {
        auto left = parse_not();
        while (is_name("and")) {
            const std::size_t off = cur().offset;
            advance();
            left = std::make_unique<BinaryExpr>(off, "and", std::move(left), parse_not());
        }
        return left;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            DepthGuard guard(*this);
            const std::size_t off = cur().offset;
            advance();
            return std::make_unique<UnaryExpr>(off, "not", parse_not());
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        auto left = parse_math1();
        bool compared = false;
        while (true) {
            const std::size_t off = cur().offset;
            std::string op;
            if (cur().type == TokenType::op &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
                 cur().value == "<=" || cur().value == ">=")) {
                op = cur().value;
                advance();
            } else if (is_name("in")) {
                op = "in";
                advance();
            } else if (is_name("not") && peek().type == TokenType::name && peek().value == "in") {
                op = "not in";
                advance();
                advance();
            } else {
                return left;
            }
            if (compared) error(off, "chained comparisons (a < b < c) are not supported; use 'and'");
            compared = true;
            left = std::make_unique<BinaryExpr>(off, op, std::move(left), parse_math1());
        }
    }

    ExprPtr parse_math1() {
        auto left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::size_t off = cur().offset;
            std::string op = cur().value;
            advance();
            left = std::make_unique<BinaryExpr>(off, op, std::move(left), parse_concat());
        }
        return left;
    }

    ExprPtr parse_concat() {
        auto left = parse_math2();
        while (is_op("~")) {
            const std::size_t off = cur().offset;
            advance();
            left = std::make_unique<BinaryExpr>(off, "~", std::move(left), parse_math2());
        }
        return left;
    }

    ExprPtr parse_math2() {
        auto left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::size_t off = cur().offset;
            std::string op = cur().value;
            advance();
            left = std::make_unique<BinaryExpr>(off, op, std::move(left), parse_pow());
        }
        return left;
    }

    ExprPtr parse_pow() {
        auto left = parse_unary(true);
        while (is_op("**")) {
            const std::size_t off = cur().offset;
            advance();
            left = std::make_unique<BinaryExpr>(off, "**", std::move(left), parse_unary(true));
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        const std::size_t off = cur().offset;
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            std::string op = cur().value;
            advance();
            node = std::make_unique<UnaryExpr>(off, op, parse_unary(false));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        const std::size_t off = t.offset;
        switch (t.type) {
            case TokenType::name: {
                const std::string name = t.value;
                advance();
                if (name == "true" || name == "True") return std::make_unique<LiteralExpr>(off, Value(true));
                if (name == "false" || name == "False") return std::make_unique<LiteralExpr>(off, Value(false));
                if (name == "none" || name == "None") return std::make_unique<LiteralExpr>(off, Value::none());
                return std::make_unique<NameExpr>(off, name);
            }
            case TokenType::string: {
                std::string text;
                while (cur().type == TokenType::string) {  // adjacent literals concatenate
                    text += cur().value;
                    advance();
                }
                return std::make_unique<LiteralExpr>(off, Value(std::move(text)));
            }
            case TokenType::integer: {
                errno = 0;
                char* end = nullptr;
                const long long v = std::strtoll(t.value.c_str(), &end, 10);
                if (errno == ERANGE) error(off, "integer literal out of range");
                advance();
                return std::make_unique<LiteralExpr>(off, Value(static_cast<std::int64_t>(v)));
            }
            case TokenType::floating: {
                const double v = std::strtod(t.value.c_str(), nullptr);
                advance();
                return std::make_unique<LiteralExpr>(off, Value(v));
            }
            case TokenType::op:
                if (t.value == "(") {
                    advance();
                    if (skip_op(")")) return std::make_unique<ListExpr>(off, true);  // ()
                    auto first = parse_expression();
                    if (!is_op(",")) {
                        expect_op(")");
                        return first;
                    }
                    auto tuple = std::make_unique<ListExpr>(off, true);
                    tuple->items.push_back(std::move(first));
                    while (skip_op(",")) {
                        if (is_op(")")) break;
                        tuple->items.push_back(parse_expression());
                    }
                    expect_op(")");
                    return tuple;
                }
                if (t.value == "[") {
                    advance();
                    auto list = std::make_unique<ListExpr>(off, false);
                    while (!is_op("]")) {
                        if (!list->items.empty()) expect_op(",");
                        if (is_op("]")) break;
                        list->items.push_back(parse_expression());
                    }
                    advance();
                    return list;
                }
                if (t.value == "{") {
                    advance();
                    auto dict = std::make_unique<DictExpr>(off);
                    while (!is_op("}")) {
                        if (!dict->items.empty()) expect_op(",");
                        if (is_op("}")) break;
                        auto key = parse_expression();
                        expect_op(":");
                        auto value = parse_expression();
                        dict->items.emplace_back(std::move(key), std::move(value));
                    }
                    advance();
                    return dict;
                }
                break;
            default: break;
        }
        error(off, fmt::format("unexpected {}", describe(t)));
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            const std::size_t off = cur().offset;
            if (is_op(".")) {
                advance();
                if (cur().type == TokenType::name || cur().type == TokenType::integer) {
                    std::string name = cur().value;
                    advance();
                    node = std::make_unique<AttrExpr>(off, std::move(node), std::move(name));
                } else {
                    error(cur().offset, fmt::format("expected an attribute name after '.', got {}", describe(cur())));
                }
            } else if (is_op("[")) {
                advance();
                node = parse_subscript(off, std::move(node));
            } else if (is_op("(")) {
                auto call = std::make_unique<CallExpr>(off);
                call->callee = std::move(node);
                call->args = parse_call_args();
                node = std::move(call);
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(std::size_t off, ExprPtr object) {
        ExprPtr start;
        if (!is_op(":")) {
            start = parse_expression();
            if (skip_op("]")) {
                auto item = std::make_unique<ItemExpr>(off);
                item->object = std::move(object);
                item->key = std::move(start);
                return item;
            }
        }
        auto slice = std::make_unique<SliceExpr>(off);
        slice->object = std::move(object);
        slice->start = std::move(start);
        expect_op(":");
        if (!is_op(":") && !is_op("]")) slice->stop = parse_expression();
        if (skip_op(":")) {
            if (!is_op("]")) slice->step = parse_expression();
        }
        expect_op("]");
        return slice;
    }

    Arguments parse_call_args() {
        expect_op("(");
        Arguments args;
        while (!is_op(")")) {
            if (!args.positional.empty() || !args.named.empty()) expect_op(",");
            if (is_op(")")) break;
            if (is_op("*") || is_op("**")) error(cur().offset, "*args / **kwargs in calls are not supported");
            if (cur().type == TokenType::name && peek().type == TokenType::op && peek().value == "=") {
                std::string name = cur().value;
                advance();
                advance();
                args.named.emplace_back(std::move(name), parse_expression());
            } else {
                if (!args.named.empty()) error(cur().offset, "positional argument follows keyword argument");
                args.positional.push_back(parse_expression());
            }
        }
        advance();
        return args;
    }

    std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr value, std::size_t off) {
        auto filter = std::make_unique<FilterExpr>(off);
        filter->value = std::move(value);
        filter->name = expect_name("a filter name");
        while (skip_op(".")) filter->name += "." + expect_name("a filter name");
        if (!has_filter(filter->name)) error(off, fmt::format("no filter named '{}'", filter->name));
        if (is_op("(")) filter->args = parse_call_args();
        return filter;
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            const std::size_t off = cur().offset;
            if (is_op("|")) {
                advance();
                node = parse_filter_call(std::move(node), off);
            } else if (is_name("is")) {
                advance();
                auto test = std::make_unique<TestExpr>(off);
                test->value = std::move(node);
                test->negated = skip_name("not");
                test->name = expect_name("a test name");
                while (skip_op(".")) test->name += "." + expect_name("a test name");
                if (!has_test(test->name)) error(off, fmt::format("no test named '{}'", test->name));
                const Token& t = cur();
                if (is_op("(")) {
                    test->args = parse_call_args();
                } else if ((t.type == TokenType::name || t.type == TokenType::string || t.type == TokenType::integer ||
                            t.type == TokenType::floating || is_op("[") || is_op("{")) &&
                           !is_name("else") && !is_name("or") && !is_name("and")) {
                    if (is_name("is")) error(t.offset, "you cannot chain multiple tests with 'is'");
                    test->args.positional.push_back(parse_postfix(parse_primary()));
                }
                node = std::move(test);
            } else if (is_op("(")) {
                auto call = std::make_unique<CallExpr>(off);
                call->callee = std::move(node);
                call->args = parse_call_args();
                node = std::move(call);
            } else {
                return node;
            }
        }
    }
};

}  // namespace

std::shared_ptr<const Program> parse_template(std::string_view source) { return Parser(lex_template(source)).run(); }

}  // namespace pagoda::chat::jinja
