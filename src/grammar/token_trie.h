// A vocabulary's tokens as a byte trie, for computing grammar masks. Built once per vocabulary
// from each token's raw bytes (Tokenizer::token_to_piece); tokens with no bytes (control tokens,
// end-of-generation markers) are not in it. Nodes are stored in depth-first order with the index
// just past each node's subtree, so a walk can skip a dead prefix's whole subtree in one step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::grammar {

class TokenTrie {
public:
    struct Node {
        uint32_t skip = 0;                      // index of the next node outside this subtree
        uint32_t tokens_begin = 0, tokens_end = 0;  // tokens whose bytes end exactly here
        uint16_t depth = 0;                     // bytes from the root (the root is node 0, depth 0)
        uint8_t byte = 0;                       // the byte on the edge into this node
    };

    explicit TokenTrie(const tokenizer::Tokenizer& tokenizer);
    // pieces[id]: the bytes of token id ("" leaves it out).
    explicit TokenTrie(const std::vector<std::string>& pieces);

    int32_t n_tokens() const { return n_tokens_; }
    const std::vector<Node>& nodes() const { return nodes_; }
    int32_t token(uint32_t i) const { return tokens_[i]; }
    const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }

private:
    void build();

    int32_t n_tokens_ = 0;
    std::vector<std::string> pieces_;
    std::vector<Node> nodes_;
    std::vector<int32_t> tokens_;
};

}  // namespace pagoda::grammar
