// llama.cpp's tokenizer test-vector format (`*.inp` / `*.out`): the .inp file holds test cases, each
// followed by the separator "\n__ggml_vocab_test__\n"; the .out file holds one line per case with the
// ids, each preceded by a space. Used by `pagoda tokenize --inp` and the tokenizer tests.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {

inline constexpr std::string_view kVectorSeparator = "\n__ggml_vocab_test__\n";

// Splits .inp content into its cases. Text after the last separator (normally none) is a final case.
std::vector<std::string> split_vector_cases(std::string_view content);
// One .out line (without the newline): " 1 2 3", or "" for no ids.
std::string format_vector_ids(const std::vector<int32_t>& ids);
// Parses .out content into one id list per line; throws pagoda::Error on a malformed line.
std::vector<std::vector<int32_t>> parse_vector_ids(std::string_view content);

// Reads a whole file; throws pagoda::Error naming the path when it cannot.
std::string read_text_file(const std::string& path);

}  // namespace pagoda::tokenizer
