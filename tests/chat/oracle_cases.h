// Shared helpers for the chat-template tests: reading files, loading expected.json (written by the
// jinja2 oracle tests/data/chat_templates/make_expected.py), the oracle's fixed strftime clock, and
// rendering a bare Jinja template with variables through pagoda's interpreter.
#pragma once
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_parser.h"
#include "fixtures.h"

namespace pagoda::test {

inline std::string chat_data_dir() { return source_dir() + "/tests/data/chat_templates"; }

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline const nlohmann::ordered_json& expected_cases() {
    static const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(read_text(chat_data_dir() + "/expected.json"));
    return cases;
}

// make_expected.py's FIXED_NOW: 2024-07-26 12:00:00 local time.
inline std::time_t oracle_now() {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    tm.tm_hour = 12;
    tm.tm_isdst = -1;
    return std::mktime(&tm);
}

inline std::string render_jinja(const std::string& source, const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
    using namespace pagoda::chat::jinja;
    auto program = parse_template(source);
    auto globals = new_globals(oracle_now());
    for (auto it = variables.begin(); it != variables.end(); ++it) globals->set(it.key(), Value::from_json(it.value()));
    return render_program(*program, globals);
}

}  // namespace pagoda::test
