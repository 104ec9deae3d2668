// Standard base64 (RFC 4648: the '+' '/' alphabet, '=' padding) — the one encoder and decoder pagoda
// has: embeddings as base64 floats, images in data: URLs and completions' multimodal_data, the
// Precompiled normalizer's charsmap in tokenizer.json.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

// Padded base64 of `bytes`.
std::string encode_base64(std::span<const uint8_t> bytes);
inline std::string encode_base64(std::string_view bytes) {
    return encode_base64(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// Decodes `text` ('=' padding optional; where present it must end a group of 4) into `out`. On
// invalid text returns false with `problem` saying what and where ("character '*' at offset 3"), for
// the caller to name the input it came from.
bool try_decode_base64(std::string_view text, std::vector<uint8_t>& out, std::string& problem);

// The same, throwing pagoda::Error "{what}: invalid base64: {problem}".
std::vector<uint8_t> decode_base64(std::string_view text, std::string_view what);

}  // namespace pagoda
