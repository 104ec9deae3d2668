// The SentencePiece and BPE merge loops (priority queue, lazy invalidation) against straightforward
// reference implementations written from the algorithm's definition (rescan all pairs after every
// merge), on random synthetic vocabularies with many score ties and random texts.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <map>
#include <set>
#include <random>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace pagoda::test {
namespace {

using namespace pagoda::tokenizer;

std::vector<std::string> utf8_chars(const std::string& s) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos < s.size();) {
        size_t len = utf8_sequence_length(s, pos);
        out.push_back(s.substr(pos, len));
        pos += len;
    }
    return out;
}

// SentencePiece by definition: merge the best-scoring adjacent pair that forms a token (ties: leftmost)
// until none does; then pieces map to tokens, or to their bytes' <0xXX> tokens.
std::vector<int32_t> spm_reference(const Vocab& v, const std::string& text) {
    std::vector<std::string> sym = utf8_chars(text);
    while (true) {
        int best = -1;
        float best_score = 0;
        for (size_t i = 0; i + 1 < sym.size(); ++i) {
            int32_t id = v.find(sym[i] + sym[i + 1]);
            if (id == kNoToken) continue;
            if (best < 0 || v.score(id) > best_score) {
                best = static_cast<int>(i);
                best_score = v.score(id);
            }
        }
        if (best < 0) break;
        sym[best] += sym[best + 1];
        sym.erase(sym.begin() + best + 1);
    }
    std::vector<int32_t> ids;
    for (const auto& s : sym) {
        if (int32_t id = v.find(s); id != kNoToken) {
            ids.push_back(id);
        } else {
            for (char c : s) ids.push_back(v.find(fmt::format("<0x{:02X}>", static_cast<uint8_t>(c))));
        }
    }
    return ids;
}

// BPE by definition: apply the lowest-ranked merge among adjacent pairs (ties: leftmost) until none.
std::vector<int32_t> bpe_reference(const std::map<std::pair<std::string, std::string>, int>& ranks, const Vocab& v,
                                   const std::string& word) {
    std::vector<std::string> sym = utf8_chars(word);
    while (true) {
        int best = -1, best_rank = 0;
        for (size_t i = 0; i + 1 < sym.size(); ++i) {
            auto it = ranks.find({sym[i], sym[i + 1]});
            if (it == ranks.end()) continue;
            if (best < 0 || it->second < best_rank) {
                best = static_cast<int>(i);
                best_rank = it->second;
            }
        }
        if (best < 0) break;
        sym[best] += sym[best + 1];
        sym.erase(sym.begin() + best + 1);
    }
    std::vector<int32_t> ids;
    for (const auto& s : sym) ids.push_back(v.find(s));
    return ids;
}

const std::vector<std::string> kAlphabet = {"a", "b", "c", "\xE2\x96\x81", "\xC3\xA9", "\xE4\xB8\xAD"};

std::string random_word(std::mt19937& rng, const std::vector<std::string>& alphabet, int max_len) {
    std::string s;
    for (int i = 0, n = 1 + rng() % max_len; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    return s;
}

TEST(SpmMerge, MatchesReferenceOnRandomVocabularies) {
    for (int trial = 0; trial < 20; ++trial) {
        std::mt19937 rng(trial);
        VocabSpec spec;
        spec.model = "llama";
        spec.tokens = {"<unk>", "<s>", "</s>"};
        spec.token_types = {2, 3, 3};
        for (int b = 0; b < 256; ++b) {
            spec.tokens.push_back(fmt::format("<0x{:02X}>", b));
            spec.token_types.push_back(6);
        }
        for (const auto& c : kAlphabet) {
            if (c == "\xE4\xB8\xAD" && trial % 2) continue;  // sometimes a character needs byte fallback
            spec.tokens.push_back(c);
            spec.token_types.push_back(1);
        }
        std::set<std::string> seen(spec.tokens.begin(), spec.tokens.end());
        for (int i = 0; i < 60; ++i) {
            std::string t = random_word(rng, kAlphabet, 5);
            if (trial % 3 == 0) {
                // Only leading U+2581 (like real SentencePiece vocabularies): exercises the word-split path.
                std::string leading = t.starts_with(kAlphabet[3]) ? kAlphabet[3] : "";
                std::string rest;
                for (const auto& c : utf8_chars(t.substr(leading.size())))
                    if (c != kAlphabet[3]) rest += c;
                t = leading + rest;
            }
            if (utf8_chars(t).size() < 2 || !seen.insert(t).second) continue;
            spec.tokens.push_back(t);
            spec.token_types.push_back(1);
        }
        spec.scores.assign(spec.tokens.size(), 0.0f);
        for (size_t i = 3 + 256; i < spec.scores.size(); ++i)
            spec.scores[i] = static_cast<float>(rng() % 5);  // few distinct scores: many ties
        Vocab v = Vocab::from_spec(spec);
        if (trial % 3 == 0) {
            EXPECT_TRUE(v.spm_words_independent());
        }
        for (int i = 0; i < 200; ++i) {
            std::string text = random_word(rng, kAlphabet, 30);
            std::vector<int32_t> got;
            spm_encode(v, text, got);
            ASSERT_EQ(got, spm_reference(v, text)) << "trial " << trial << " text '" << text << "'";
        }
    }
}

TEST(BpeMerge, MatchesReferenceOnRandomVocabularies) {
    for (int trial = 0; trial < 20; ++trial) {
        std::mt19937 rng(100 + trial);
        VocabSpec spec;
        spec.model = "gpt2";
        spec.pre = "gpt-2";
        std::set<std::string> seen;
        for (int b = 0; b < 256; ++b) {
            std::string t;
            byte_level_encode(std::string(1, static_cast<char>(b)), t);
            spec.tokens.push_back(t);
            seen.insert(t);
        }
        std::vector<std::string> alphabet = {"a", "b", "c", "\xC4\xA0" /* Ġ */};
        std::vector<std::string> pieces = alphabet;
        std::map<std::pair<std::string, std::string>, int> ranks;
        for (int i = 0; i < 80; ++i) {
            const std::string& l = pieces[rng() % pieces.size()];
            const std::string& r = pieces[rng() % pieces.size()];
            if (ranks.count({l, r})) continue;
            ranks[{l, r}] = static_cast<int>(spec.merges.size());
            spec.merges.push_back(l + " " + r);
            if (seen.insert(l + r).second) spec.tokens.push_back(l + r);
            pieces.push_back(l + r);
        }
        Vocab v = Vocab::from_spec(spec);
        BpeEncoder encoder(v);
        for (int i = 0; i < 200; ++i) {
            std::string word = random_word(rng, alphabet, 25);
            std::vector<int32_t> got;
            encoder.encode_word(word, got);
            ASSERT_EQ(got, bpe_reference(ranks, v, word)) << "trial " << trial << " word '" << word << "'";
            got.clear();
            encoder.encode_word(word, got);  // a second time, from the cache
            ASSERT_EQ(got, bpe_reference(ranks, v, word));
        }
    }
}

}  // namespace
}  // namespace pagoda::test
