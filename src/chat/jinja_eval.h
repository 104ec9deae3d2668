// Jinja evaluation: runs a parsed Program against a set of global variables and returns the text.
// Scoping follows Jinja: each for-loop iteration and each macro call gets its own scope (so `set`
// inside a loop does not leak out — use namespace() for that), `if` blocks do not. Runtime errors
// are pagoda::Error naming line and column; raise_exception('msg') throws TemplateRaised whose
// what() is exactly the template's message. Work is bounded (loop iterations, output size, call
// depth) so a hostile template fails with an error instead of hanging or exhausting memory.
#pragma once
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_ops.h"
#include "core/error.h"

namespace pagoda::chat::jinja {

// raise_exception() from a template: the message is the template author's, unchanged.
class TemplateRaised : public pagoda::Error {
public:
    using pagoda::Error::Error;
};

// An error that already carries its template position (so it is not wrapped twice).
class LocatedError : public pagoda::Error {
public:
    using pagoda::Error::Error;
};

struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;

    const Value* find(std::string_view name) const;
    void set(const std::string& name, Value value);
};

struct Limits {
    std::size_t max_output_bytes = 64u << 20;
    std::size_t max_loop_iterations = 1'000'000;
    int max_call_depth = 200;
};

class Context {
public:
    Context(const Program& program, std::shared_ptr<Frame> globals, Limits limits = {});

    Value lookup(const std::string& name) const;
    void assign(const std::string& name, Value value) { scope->set(name, std::move(value)); }

    // Runs `fn`, turning any unlocated pagoda::Error into one that names `offset`'s line and column.
    template <class Fn>
    auto at(std::size_t offset, Fn&& fn) -> decltype(fn()) {
        try {
            return fn();
        } catch (const TemplateRaised&) {
            throw;
        } catch (const LocatedError&) {
            throw;
        } catch (const std::bad_alloc&) {
            throw;
        } catch (const std::exception& e) {
            throw_located(offset, e.what());
        }
    }
    [[noreturn]] void throw_located(std::size_t offset, const std::string& what) const;

    void count_iteration();
    void check_output(const std::string& out) const;

    const Program& program;
    std::shared_ptr<Frame> scope;
    Limits limits;
    int call_depth = 0;
    std::size_t iterations = 0;
};

// Renders `program` with `globals` (the render variables plus builtin functions).
std::string render_program(const Program& program, std::shared_ptr<Frame> globals, Limits limits = {});

// namespace() objects are the only values that can reference themselves (`set ns.me = ns`); each
// render remembers the ones it created and empties them when it ends so such cycles cannot leak.
void register_namespace(const std::shared_ptr<Dict>& ns);

}  // namespace pagoda::chat::jinja
