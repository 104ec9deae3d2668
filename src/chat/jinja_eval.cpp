#include "chat/jinja_eval.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"

namespace pagoda::chat::jinja {

// ---- scopes and context ------------------------------------------------------------------------

const Value* Frame::find(std::string_view name) const {
    for (const Frame* f = this; f; f = f->parent.get())
        for (const auto& [k, v] : f->vars)
            if (k == name) return &v;
    return nullptr;
}

void Frame::set(const std::string& name, Value value) {
    for (auto& [k, v] : vars) {
        if (k == name) {
            v = std::move(value);
            return;
        }
    }
    vars.emplace_back(name, std::move(value));
}

Context::Context(const Program& p, std::shared_ptr<Frame> globals, Limits l)
    : program(p), scope(std::move(globals)), limits(l) {}

Value Context::lookup(const std::string& name) const {
    if (const Value* v = scope->find(name)) return *v;
    return Value::undefined("'" + name + "' is undefined");
}

void Context::throw_located(std::size_t offset, const std::string& what) const {
    throw LocatedError("chat template error at " + describe_position(program.source, offset) + ": " + what);
}

void Context::count_iteration() {
    if (++iterations > limits.max_loop_iterations)
        fail("template exceeded {} loop iterations", limits.max_loop_iterations);
}

void Context::check_output(const std::string& out) const {
    if (out.size() > limits.max_output_bytes) fail("template output exceeded {} bytes", limits.max_output_bytes);
}


namespace {

// A new scope for a loop iteration or macro call; restores the previous one when done.
class ScopeGuard {
public:
    ScopeGuard(Context& ctx, std::shared_ptr<Frame> parent) : ctx_(ctx), saved_(ctx.scope) {
        auto frame = std::make_shared<Frame>();
        frame->parent = std::move(parent);
        ctx.scope = std::move(frame);
    }
    ~ScopeGuard() { ctx_.scope = std::move(saved_); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

private:
    Context& ctx_;
    std::shared_ptr<Frame> saved_;
};

CallArgs eval_args(const Arguments& args, Context& ctx) {
    CallArgs out;
    out.positional.reserve(args.positional.size());
    for (const auto& e : args.positional) out.positional.push_back(e->eval(ctx));
    for (const auto& [name, e] : args.named) out.named.emplace_back(name, e->eval(ctx));
    return out;
}

}  // namespace


// ---- expressions -------------------------------------------------------------------------------

Value LiteralExpr::eval(Context&) const { return value; }

Value NameExpr::eval(Context& ctx) const { return ctx.lookup(name); }

Value ListExpr::eval(Context& ctx) const {
    List list;
    list.reserve(items.size());
    for (const auto& item : items) list.push_back(item->eval(ctx));
    return is_tuple ? Value::tuple(std::move(list)) : Value(std::move(list));
}

Value DictExpr::eval(Context& ctx) const {
    auto dict = std::make_shared<Dict>();
    for (const auto& [k, v] : items) {
        Value key = k->eval(ctx);
        if (!key.is_string()) ctx.throw_located(k->offset, "dictionary keys must be strings in chat templates, got " + key.type_name());
        dict->set(key.as_string(), v->eval(ctx));
    }
    return Value(std::move(dict));
}

Value AttrExpr::eval(Context& ctx) const {
    Value obj = object->eval(ctx);
    return ctx.at(offset, [&] { return get_attribute(obj, name); });
}

Value ItemExpr::eval(Context& ctx) const {
    Value obj = object->eval(ctx);
    Value k = key->eval(ctx);
    return ctx.at(offset, [&] { return get_item(obj, k); });
}

Value SliceExpr::eval(Context& ctx) const {
    Value obj = object->eval(ctx);
    Value a = start ? start->eval(ctx) : Value::none();
    Value b = stop ? stop->eval(ctx) : Value::none();
    Value c = step ? step->eval(ctx) : Value::none();
    return ctx.at(offset, [&] { return slice_value(obj, a, b, c); });
}

Value CallExpr::eval(Context& ctx) const {
    Value fn = callee->eval(ctx);
    CallArgs args = eval_args(this->args, ctx);
    return ctx.at(offset, [&] { return call_value(fn, args); });
}

Value FilterExpr::eval(Context& ctx) const {
    Value v = value ? value->eval(ctx) : Value::undefined();
    CallArgs call = eval_args(args, ctx);
    return ctx.at(offset, [&] { return apply_filter(name, v, call); });
}

Value TestExpr::eval(Context& ctx) const {
    Value v = value->eval(ctx);
    CallArgs call = eval_args(args, ctx);
    const bool result = ctx.at(offset, [&] { return apply_test(name, v, call); });
    return Value(negated ? !result : result);
}

Value UnaryExpr::eval(Context& ctx) const {
    Value v = operand->eval(ctx);
    if (op == "not") return Value(!v.truthy());
    return ctx.at(offset, [&] { return unary_operation(op, v); });
}

Value BinaryExpr::eval(Context& ctx) const {
    Value a = left->eval(ctx);
    if (op == "and") return a.truthy() ? right->eval(ctx) : a;
    if (op == "or") return a.truthy() ? a : right->eval(ctx);
    Value b = right->eval(ctx);
    return ctx.at(offset, [&] { return binary_operation(op, a, b); });
}

Value CondExpr::eval(Context& ctx) const {
    if (condition->eval(ctx).truthy()) return then_value->eval(ctx);
    if (else_value) return else_value->eval(ctx);
    return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
}

// ---- statements --------------------------------------------------------------------------------

Flow exec_body(const Body& body, Context& ctx, std::string& out) {
    for (const auto& stmt : body) {
        const Flow flow = stmt->exec(ctx, out);
        if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
}

Flow TextStmt::exec(Context& ctx, std::string& out) const {
    out += text;
    ctx.at(offset, [&] { ctx.check_output(out); });
    return Flow::normal;
}

Flow OutputStmt::exec(Context& ctx, std::string& out) const {
    Value v = expr->eval(ctx);
    out += v.str();
    ctx.at(offset, [&] { ctx.check_output(out); });
    return Flow::normal;
}

Flow IfStmt::exec(Context& ctx, std::string& out) const {
    for (const auto& [cond, body] : branches)
        if (cond->eval(ctx).truthy()) return exec_body(body, ctx, out);
    return exec_body(else_body, ctx, out);
}

namespace {

// Jinja's LoopContext is one object that advances; so is ours: one dict per for-statement whose
// fields are rewritten each iteration (cheaper than building a dict per item).
class LoopObject {
public:
    LoopObject(const List& items) : items_(items), dict_(std::make_shared<Dict>()), index_(std::make_shared<std::size_t>(0)) {
        const auto n = static_cast<std::int64_t>(items.size());
        dict_->is_namespace = true;  // attribute access only; `loop.items` is not a dict method
        dict_->read_only = true;
        dict_->items = {{"index0", Value(0)},     {"index", Value(1)},       {"revindex0", Value(n - 1)},
                        {"revindex", Value(n)},   {"first", Value(true)},    {"last", Value(n == 1)},
                        {"length", Value(n)},     {"depth", Value(1)},       {"depth0", Value(0)},
                        {"previtem", Value()},    {"nextitem", Value()},     {"cycle", Value()}};
        std::shared_ptr<std::size_t> index = index_;
        dict_->items[11].second = Value::callable("loop.cycle", [index](CallArgs& args) -> Value {
            if (args.positional.empty()) fail("no items for cycling given");
            return args.positional[*index % args.positional.size()];
        });
    }

    Value at(std::size_t index) {
        *index_ = index;
        const auto n = static_cast<std::int64_t>(items_.size());
        const auto i = static_cast<std::int64_t>(index);
        auto& f = dict_->items;
        f[0].second = Value(i);
        f[1].second = Value(i + 1);
        f[2].second = Value(n - i - 1);
        f[3].second = Value(n - i);
        f[4].second = Value(i == 0);
        f[5].second = Value(i == n - 1);
        f[9].second = i > 0 ? items_[index - 1] : Value::undefined("there is no previous item");
        f[10].second = i + 1 < n ? items_[index + 1] : Value::undefined("there is no next item");
        return Value(dict_);
    }

private:
    const List& items_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<std::size_t> index_;
};

void bind_targets(Context& ctx, const std::vector<std::string>& targets, const Value& item) {
    if (targets.size() == 1) {
        ctx.assign(targets[0], item);
        return;
    }
    List parts = iterate(item);
    if (parts.size() != targets.size())
        fail("cannot unpack {} values into {} loop variables", parts.size(), targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) ctx.assign(targets[i], parts[i]);
}

}  // namespace

Flow ForStmt::exec(Context& ctx, std::string& out) const {
    Value source = iterable->eval(ctx);
    List all = ctx.at(iterable->offset, [&] { return iterate(source); });
    List items;
    if (filter) {
        // The `if` filter sees the loop variables but not `loop` (Jinja filters before counting).
        for (const auto& item : all) {
            ScopeGuard scope(ctx, ctx.scope);
            ctx.at(offset, [&] { bind_targets(ctx, targets, item); });
            if (filter->eval(ctx).truthy()) items.push_back(item);
        }
    } else {
        items = std::move(all);
    }
    if (items.empty()) return exec_body(else_body, ctx, out);
    LoopObject loop(items);  // loop.depth counts recursive-loop levels, so plain nested loops stay at 1
    const std::shared_ptr<Frame> enclosing = ctx.scope;
    for (std::size_t i = 0; i < items.size(); ++i) {
        ctx.at(offset, [&] { ctx.count_iteration(); });
        ScopeGuard scope(ctx, enclosing);
        ctx.assign("loop", loop.at(i));
        ctx.at(offset, [&] { bind_targets(ctx, targets, items[i]); });
        const Flow flow = exec_body(body, ctx, out);
        if (flow == Flow::break_loop) break;
    }
    return Flow::normal;
}

Flow SetStmt::exec(Context& ctx, std::string&) const {
    Value v = value->eval(ctx);
    ctx.at(offset, [&] {
        if (!attribute.empty()) {
            Value target = ctx.lookup(targets[0]);
            if (!target.is_dict() || !target.as_dict()->is_namespace || target.as_dict()->read_only)
                fail("cannot assign attribute on non-namespace object '{}'", targets[0]);
            target.as_dict()->set(attribute, std::move(v));
            return;
        }
        if (targets.size() == 1) {
            ctx.assign(targets[0], std::move(v));
            return;
        }
        List parts = iterate(v);
        if (parts.size() != targets.size()) fail("cannot unpack {} values into {} names", parts.size(), targets.size());
        for (std::size_t i = 0; i < targets.size(); ++i) ctx.assign(targets[i], parts[i]);
    });
    return Flow::normal;
}

Flow SetBlockStmt::exec(Context& ctx, std::string&) const {
    std::string captured;
    exec_body(body, ctx, captured);
    ctx.assign(target, Value(std::move(captured)));
    return Flow::normal;
}

Flow MacroStmt::exec(Context& ctx, std::string&) const {
    Context* context = &ctx;
    const MacroStmt* macro = this;
    // The macro lives in the frame it closes over, so it holds that frame weakly (no cycle). A macro
    // smuggled out of a finished loop iteration falls back to the caller's scope.
    std::weak_ptr<Frame> weak_closure = ctx.scope;
    ctx.assign(name, Value::callable(name, [context, macro, weak_closure](CallArgs& args) -> Value {
        Context& c = *context;
        std::shared_ptr<Frame> closure = weak_closure.lock();
        if (!closure) closure = c.scope;
        if (args.positional.size() > macro->params.size())
            fail("macro '{}' takes not more than {} argument(s)", macro->name, macro->params.size());
        if (c.call_depth >= c.limits.max_call_depth) fail("macro calls nested deeper than {}", c.limits.max_call_depth);
        std::vector<Value> bound(macro->params.size());
        std::vector<bool> given(macro->params.size(), false);
        for (std::size_t i = 0; i < args.positional.size(); ++i) {
            bound[i] = args.positional[i];
            given[i] = true;
        }
        for (auto& [name, value] : args.named) {
            bool found = false;
            for (std::size_t i = 0; i < macro->params.size(); ++i) {
                if (macro->params[i].name == name) {
                    if (given[i]) fail("macro '{}' got multiple values for argument '{}'", macro->name, name);
                    bound[i] = value;
                    given[i] = true;
                    found = true;
                }
            }
            if (!found) fail("macro '{}' has no argument named '{}'", macro->name, name);
        }
        ScopeGuard scope(c, closure);
        ++c.call_depth;
        struct DepthRestore {
            Context& c;
            ~DepthRestore() { --c.call_depth; }
        } restore{c};
        for (std::size_t i = 0; i < macro->params.size(); ++i) {
            const auto& param = macro->params[i];
            if (!given[i])
                bound[i] = param.default_value ? param.default_value->eval(c)
                                               : Value::undefined("'" + param.name + "' is undefined");
            c.assign(param.name, bound[i]);
        }
        std::string out;
        exec_body(macro->body, c, out);
        return Value(std::move(out));
    }));
    return Flow::normal;
}

Flow LoopControlStmt::exec(Context&, std::string&) const { return flow; }

Flow FilterBlockStmt::exec(Context& ctx, std::string& out) const {
    std::string captured;
    exec_body(body, ctx, captured);
    CallArgs call = eval_args(filter->args, ctx);
    Value v = ctx.at(offset, [&] { return apply_filter(filter->name, Value(std::move(captured)), call); });
    out += v.str();
    return Flow::normal;
}

Flow PassThroughStmt::exec(Context& ctx, std::string& out) const { return exec_body(body, ctx, out); }

namespace {
thread_local std::vector<std::weak_ptr<Dict>>* t_namespaces = nullptr;

class NamespaceRegistry {
public:
    NamespaceRegistry() : saved_(t_namespaces) { t_namespaces = &created_; }
    ~NamespaceRegistry() {
        t_namespaces = saved_;
        for (auto& weak : created_)
            if (auto ns = weak.lock()) ns->items.clear();
    }
    NamespaceRegistry(const NamespaceRegistry&) = delete;
    NamespaceRegistry& operator=(const NamespaceRegistry&) = delete;

private:
    std::vector<std::weak_ptr<Dict>> created_;
    std::vector<std::weak_ptr<Dict>>* saved_;
};
}  // namespace

void register_namespace(const std::shared_ptr<Dict>& ns) {
    if (t_namespaces) t_namespaces->push_back(ns);
}

std::string render_program(const Program& program, std::shared_ptr<Frame> globals, Limits limits) {
    NamespaceRegistry registry;
    // Template-level variables live in their own frame above the globals, as in Jinja.
    auto top = std::make_shared<Frame>();
    top->parent = std::move(globals);
    Context ctx(program, std::move(top), limits);
    std::string out;
    exec_body(program.body, ctx, out);
    return out;
}

}  // namespace pagoda::chat::jinja
