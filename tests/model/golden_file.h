// Reads llama2.c golden files (`../shared/models/golden/*.ids.txt`): the prompt ids (BOS included),
// the whole fed sequence, and the logits printed for the first positions.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::test {

struct GoldenIds {
    std::vector<int32_t> prompt, tokens;
    std::vector<std::pair<int, std::vector<float>>> logits;  // (position, values)
};

inline GoldenIds read_golden_ids(const std::string& path) {
    GoldenIds g;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream s(line);
        std::string head, count;
        s >> head;
        if (head == "prompt_tokens" || head == "tokens") {
            s >> count;  // "N:"
            std::vector<int32_t> ids;
            int32_t v;
            while (s >> v) ids.push_back(v);
            (head == "tokens" ? g.tokens : g.prompt) = std::move(ids);
        } else if (head == "logits") {
            std::string pos, input;
            s >> pos >> input;  // pos=P input_token=T:
            std::vector<float> values;
            float v;
            while (s >> v) values.push_back(v);
            g.logits.push_back({std::stoi(pos.substr(4)), std::move(values)});
        }
    }
    return g;
}

}  // namespace pagoda::test
