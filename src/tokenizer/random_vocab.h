// Synthetic encoder vocabularies for `pagoda gen-model` (random BERT / XLM-R style models) and tests:
// deterministic for a (size, seed) pair on every platform (own arithmetic generator, no std
// distributions). Every lowercase ASCII letter, digit and punctuation character is a piece, so any
// ASCII text encodes without unknowns; the rest are random words and continuations.
//   make_random_wordpiece_spec: a "bert" spec in Hugging Face's spelling ("##" continuations) with
//   [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, a lowercasing BERT normalizer, [CLS] a [SEP] b [SEP] pairs.
//   make_random_unigram_spec: a "t5" spec in XLM-R's layout (<s> 0, <pad> 1, </s> 2, <unk> 3), random
//   negative scores, Metaspace's "always" prefix and split (as XLM-R's tokenizer.json), <s> a </s></s> b </s> pairs.
// Both need n_vocab >= 128 (throws pagoda::Error otherwise) and give exactly n_vocab tokens.
#pragma once
#include <cstdint>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

VocabSpec make_random_wordpiece_spec(int64_t n_vocab, uint64_t seed);
VocabSpec make_random_unigram_spec(int64_t n_vocab, uint64_t seed);

}  // namespace pagoda::tokenizer
