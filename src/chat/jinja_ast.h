// The syntax tree of a parsed Jinja template. Expressions evaluate to a Value; statements append
// to the output. Each node keeps the source offset it came from so runtime errors can name a line
// and column. Evaluation is implemented in jinja_eval.cpp; the parser in jinja_parser.cpp builds it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace pagoda::chat::jinja {

class Context;

struct Expr {
    explicit Expr(std::size_t off) : offset(off) {}
    virtual ~Expr() = default;
    virtual Value eval(Context& ctx) const = 0;
    std::size_t offset;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Arguments {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> named;
};

struct LiteralExpr : Expr {
    LiteralExpr(std::size_t off, Value v) : Expr(off), value(std::move(v)) {}
    Value eval(Context& ctx) const override;
    Value value;
};

struct NameExpr : Expr {
    NameExpr(std::size_t off, std::string n) : Expr(off), name(std::move(n)) {}
    Value eval(Context& ctx) const override;
    std::string name;
};

struct ListExpr : Expr {  // list and tuple displays
    ListExpr(std::size_t off, bool tuple) : Expr(off), is_tuple(tuple) {}
    Value eval(Context& ctx) const override;
    std::vector<ExprPtr> items;
    bool is_tuple;
};

struct DictExpr : Expr {
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttrExpr : Expr {  // obj.name, obj.0
    AttrExpr(std::size_t off, ExprPtr o, std::string n) : Expr(off), object(std::move(o)), name(std::move(n)) {}
    Value eval(Context& ctx) const override;
    ExprPtr object;
    std::string name;
};

struct ItemExpr : Expr {  // obj[key]
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr object, key;
};

struct SliceExpr : Expr {  // obj[start:stop:step]
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr object, start, stop, step;  // each may be null
};

struct CallExpr : Expr {
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr callee;
    Arguments args;
};

struct FilterExpr : Expr {  // value | name(args); value is null inside {% filter %} blocks
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr value;
    std::string name;
    Arguments args;
};

struct TestExpr : Expr {  // value is [not] name(args)
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr value;
    std::string name;
    Arguments args;
    bool negated = false;
};

struct UnaryExpr : Expr {  // not, -, +
    UnaryExpr(std::size_t off, std::string o, ExprPtr v) : Expr(off), op(std::move(o)), operand(std::move(v)) {}
    Value eval(Context& ctx) const override;
    std::string op;
    ExprPtr operand;
};

struct BinaryExpr : Expr {  // arithmetic, ~, comparisons, in / not in, and / or
    BinaryExpr(std::size_t off, std::string o, ExprPtr l, ExprPtr r)
        : Expr(off), op(std::move(o)), left(std::move(l)), right(std::move(r)) {}
    Value eval(Context& ctx) const override;
    std::string op;
    ExprPtr left, right;
};

struct CondExpr : Expr {  // a if cond else b (b absent: undefined)
    using Expr::Expr;
    Value eval(Context& ctx) const override;
    ExprPtr then_value, condition, else_value;
};

// ---- statements -------------------------------------------------------------------------------

enum class Flow { normal, break_loop, continue_loop };

struct Stmt {
    explicit Stmt(std::size_t off) : offset(off) {}
    virtual ~Stmt() = default;
    virtual Flow exec(Context& ctx, std::string& out) const = 0;
    std::size_t offset;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

Flow exec_body(const Body& body, Context& ctx, std::string& out);

struct TextStmt : Stmt {
    TextStmt(std::size_t off, std::string t) : Stmt(off), text(std::move(t)) {}
    Flow exec(Context& ctx, std::string& out) const override;
    std::string text;
};

struct OutputStmt : Stmt {
    OutputStmt(std::size_t off, ExprPtr e) : Stmt(off), expr(std::move(e)) {}
    Flow exec(Context& ctx, std::string& out) const override;
    ExprPtr expr;
};

struct IfStmt : Stmt {
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body else_body;
};

struct ForStmt : Stmt {
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::vector<std::string> targets;  // one name, or several for tuple unpacking
    ExprPtr iterable, filter;
    Body body, else_body;
};

struct SetStmt : Stmt {  // set a = …, set a, b = …, set ns.attr = …
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::vector<std::string> targets;
    std::string attribute;  // non-empty for `set ns.attr`
    ExprPtr value;
};

struct SetBlockStmt : Stmt {  // {% set name %}…{% endset %}
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::string target;
    Body body;
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::string name;
    std::vector<MacroParam> params;
    Body body;
};

struct LoopControlStmt : Stmt {  // break / continue (jinja2.ext.loopcontrols, enabled by HF)
    LoopControlStmt(std::size_t off, Flow f) : Stmt(off), flow(f) {}
    Flow exec(Context& ctx, std::string& out) const override;
    Flow flow;
};

struct FilterBlockStmt : Stmt {  // {% filter name(args) %}…{% endfilter %}
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    std::unique_ptr<FilterExpr> filter;  // its value is the rendered body
    Body body;
};

struct PassThroughStmt : Stmt {  // {% generation %}…{% endgeneration %} (HF's assistant mask marker)
    using Stmt::Stmt;
    Flow exec(Context& ctx, std::string& out) const override;
    Body body;
};

struct Program {
    std::string source;  // normalised source, for error positions
    Body body;
};

}  // namespace pagoda::chat::jinja
