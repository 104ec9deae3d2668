// Jinja parser: builds the syntax tree (jinja_ast.h) from the lexer's tokens, following Jinja's own
// grammar and operator precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary,
// with filters `|`, tests `is` and calls binding to the operand before them). Supported tags: if /
// elif / else, for (with `if` filter, else, tuple targets), set (plain, tuple, namespace attribute,
// block form), macro, filter, break / continue, raw, generation. Syntax errors throw pagoda::Error
// naming line and column.
#pragma once
#include <string_view>

#include "chat/jinja_ast.h"

namespace pagoda::chat::jinja {

std::shared_ptr<const Program> parse_template(std::string_view source);

}  // namespace pagoda::chat::jinja
