#!/usr/bin/env python3
"""Writes the small Hugging Face tokenizer folders the tests read (tests/tokenizer/hf_*_test.cpp).

Each folder is a tokenizer.json + tokenizer_config.json in the structure the family's real files
have (keys, step types and their order), over a tiny vocabulary: the 256 byte tokens plus the
pieces of a few words, so the tests can state exact ids. The chat template is the family's
published one from tests/data/chat_templates. Run from anywhere; it rewrites the folders.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "chat_templates")
SPACE = "\u2581"
WORDS = ["user", "assistant", "system", "model", "Hi", "Hello", "Bye"]
LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def template(name):
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
        return f.read()


def byte_chars():
    """GPT-2's byte -> printable character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def added(token_id, content, special=True, rstrip=False):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": rstrip,
            "normalized": not special, "special": special}


def decoder_entry(a):
    return {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}


def write(folder, tokenizer, config):
    os.makedirs(os.path.join(HERE, folder), exist_ok=True)
    for name, doc in (("tokenizer.json", tokenizer), ("tokenizer_config.json", config)):
        with open(os.path.join(HERE, folder, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")


def byte_level(folder, regex, specials, bos, eos, chat_template, ignore_merges, pair_merges):
    """Llama 3 / Qwen style: 256 byte characters (id = byte), then each word's prefixes, merged left to right."""
    chars = byte_chars()
    vocab = {chars[b]: b for b in range(256)}
    merges = []
    for word in WORDS + ["\u010a\u010a"]:  # and "\n\n"
        prefix = word[0]
        for c in word[1:]:
            merges.append([prefix, c] if pair_merges else prefix + " " + c)
            prefix += c
            if prefix not in vocab:
                vocab[prefix] = len(vocab)
    first_special = len(vocab)
    added_tokens = [added(first_special + i, s) for i, s in enumerate(specials)]
    bos_id = first_special + specials.index(bos) if bos else None
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
        "normalizer": {"type": "NFC"} if not bos else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}]} if bos else
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges},
    }
    config = {"add_bos_token": bool(bos), "added_tokens_decoder": {str(a["id"]): decoder_entry(a) for a in added_tokens},
              "bos_token": bos, "chat_template": chat_template, "clean_up_tokenization_spaces": False,
              "eos_token": eos, "model_max_length": 131072, "pad_token": None,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    write(folder, tokenizer, config)


def sentencepiece(folder, specials, rstrip, prefix_space, metaspace, chat_template, bos, eos, config_extra,
                  split_at_spaces=None):
    """Llama 2 / Mistral / Gemma / Phi-3 style: <unk> <s> </s>, the 256 <0xXX> tokens, every character and
    prefix of the words (with and without the leading U+2581), merges derived from the scores the way
    transformers' SentencePiece converter derives them."""
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    scores = [0.0] * len(pieces)
    words = WORDS + [SPACE + w for w in WORDS] + ["\n\n"]
    chars = sorted({c for w in words for c in w})
    for c in chars:
        pieces.append(c)
        scores.append(-1000.0 - len(scores))
    for w in words:
        for end in range(2, len(w) + 1):
            if w[:end] not in pieces:
                pieces.append(w[:end])
                scores.append(-float(len(scores)))
    ids = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i, piece in enumerate(pieces):
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in ids and piece[k:] in ids]
        local.sort(key=lambda lr: (ids[lr[0]], ids[lr[1]]))
        merges += [(l, r, scores[i]) for l, r in local]
    merges.sort(key=lambda m: -m[2])
    vocab = dict(ids)
    first_special = len(pieces)
    added_tokens = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    added_tokens += [added(first_special + i, s, rstrip=s in rstrip) for i, s in enumerate(specials)]
    for a in added_tokens[3:]:
        vocab[a["content"]] = a["id"]
    bos_id = {"<s>": 1}.get(bos, first_special + specials.index(bos) if bos in specials else None)
    normalizers = [{"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]
    if prefix_space and not metaspace:
        normalizers.insert(0, {"type": "Prepend", "prepend": SPACE})
    decoders = [{"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}]
    if prefix_space:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
        "normalizer": None if metaspace else
        (normalizers[0] if len(normalizers) == 1 else {"type": "Sequence", "normalizers": normalizers}),
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
        if metaspace else split_at_spaces,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}},
        "decoder": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
        if metaspace else {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [l + " " + r for l, r, _ in merges]},
    }
    config = {"add_bos_token": True, "add_eos_token": False,
              "added_tokens_decoder": {str(a["id"]): decoder_entry(a) for a in added_tokens},
              "bos_token": bos, "chat_template": chat_template, "clean_up_tokenization_spaces": False,
              "eos_token": eos, "legacy": False, "model_max_length": 32768, "pad_token": None,
              "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>"}
    config.update(config_extra)
    write(folder, tokenizer, config)


def main():
    llama_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                      "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
    byte_level("llama3.1", LLAMA3_REGEX, llama_specials, "<|begin_of_text|>", "<|eot_id|>",
               [{"name": "default", "template": template("llama3.1")}, {"name": "tool_use", "template": "{{ tools }}"}],
               ignore_merges=True, pair_merges=True)
    byte_level("qwen3", QWEN2_REGEX, ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"], None,
               "<|im_end|>", template("qwen3"), ignore_merges=False, pair_merges=False)
    sentencepiece("mistral", ["[INST]", "[/INST]"], [], True, False, template("mistral-v3"), "<s>", "</s>",
                  {"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": True,
                                 "rstrip": False, "single_word": False}})
    sentencepiece("phi3", ["<|endoftext|>", "<|assistant|>", "<|end|>", "<|system|>", "<|user|>"],
                  ["<|assistant|>", "<|end|>", "<|system|>", "<|user|>"], True, True, template("phi3"), "<s>",
                  "<|endoftext|>", {})
    sentencepiece("gemma3", ["<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"], [], False, False,
                  template("gemma3"), "<bos>", "<eos>", {"pad_token": "<pad>"},
                  split_at_spaces={"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                                   "invert": False})


if __name__ == "__main__":
    main()
