// Jinja lexer: turns template source into text and tag tokens, applying the whitespace rules of
// the environment Hugging Face renders chat templates with (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): newlines are normalised to "\n", one trailing newline is dropped,
// `{%-`/`-%}` (and the {{ }} / {# #} forms) strip whitespace, `%}`/`#}` eat one following newline,
// and whitespace before `{%`/`{#` on an otherwise blank line is removed unless the tag says `{%+`.
// Comments vanish; `{% raw %}…{% endraw %}` becomes text. Errors are pagoda::Error with line:column.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat::jinja {

enum class TokenType { text, variable_begin, variable_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
    TokenType type;
    std::string value;  // text, name, decoded string literal, number spelling, or operator
    std::size_t offset;  // into the normalised source, for line:column in messages
};

struct LexedTemplate {
    std::string source;  // normalised source (offsets refer to it)
    std::vector<Token> tokens;
};

LexedTemplate lex_template(std::string_view source);

// "line L, column C" for an offset into `source`.
std::string describe_position(std::string_view source, std::size_t offset);

}  // namespace pagoda::chat::jinja
