// `pagoda tokenize -m MODEL.gguf`: text on stdin -> token ids on stdout (space separated), or with
// --detok ids on stdin -> text. `--inp FILE.inp` encodes every case of a llama.cpp test-vector file and
// prints one `.out` line per case (no BOS/EOS, special tokens not parsed), for comparison with `.out`.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "apps/command.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vector_file.h"

namespace pagoda::app {
namespace {

struct TokenizeOptions {
    std::string model;
    std::string inp;
    bool bos = false;
    bool no_bos = false;
    bool eos = false;
    bool special = false;
    bool detok = false;
    bool render_special = false;
};

std::vector<int32_t> read_ids(std::istream& in) {
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long value = 0;
        try {
            value = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size() || value < INT32_MIN || value > INT32_MAX)
            fail("'{}' on stdin is not a token id", word);
        ids.push_back(static_cast<int32_t>(value));
    }
    return ids;
}

int run_tokenize(const TokenizeOptions& o) {
    auto file = model::open_model_file(o.model, {.quantize = {}, .threads = 0, .tokenizer = true});
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    if (!o.inp.empty()) {
        std::string content = tokenizer::read_text_file(o.inp);
        tokenizer::EncodeOptions enc{.add_bos = false, .add_eos = false, .parse_special = false};
        for (const std::string& text : tokenizer::split_vector_cases(content))
            std::printf("%s\n", tokenizer::format_vector_ids(tok->encode(text, enc)).c_str());
        return 0;
    }
    if (o.detok) {
        std::vector<int32_t> ids = read_ids(std::cin);
        std::string text = tok->decode(ids, {.render_special = o.render_special});
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::printf("\n");
        return 0;
    }
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    tokenizer::EncodeOptions enc;
    if (o.bos) enc.add_bos = true;
    if (o.no_bos) enc.add_bos = false;
    if (o.eos) enc.add_eos = true;
    enc.parse_special = o.special;
    std::vector<int32_t> ids = tok->encode(text, enc);
    std::string line = tokenizer::format_vector_ids(ids);
    std::printf("%s\n", line.empty() ? "" : line.c_str() + 1);
    return 0;
}

CommandRegistration reg("tokenize", "Tokenize stdin with a model's vocabulary (or detokenize ids)", [](CLI::App& sub) {
    auto o = std::make_shared<TokenizeOptions>();
    sub.add_option("-m,--model", o->model, "GGUF model or vocabulary file, or a Hugging Face model folder")->required();
    sub.add_option("--inp", o->inp, "encode each case of a llama.cpp .inp test-vector file, one .out line each");
    auto* bos = sub.add_flag("--bos", o->bos, "add BOS (default: the vocabulary's setting)");
    sub.add_flag("--no-bos", o->no_bos, "do not add BOS")->excludes(bos);
    sub.add_flag("--eos", o->eos, "add EOS");
    sub.add_flag("--special", o->special, "parse special-token text such as <|im_end|> in the input");
    sub.add_flag("--detok", o->detok, "read token ids from stdin and print the text");
    sub.add_flag("--render-special", o->render_special, "with --detok: print control tokens' text");
    return [o] { return run_tokenize(*o); };
});

}  // namespace
}  // namespace pagoda::app
