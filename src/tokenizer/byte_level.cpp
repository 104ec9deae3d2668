#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

bool maps_to_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
    std::array<char32_t, 256> codepoint{};
    std::array<std::string, 256> utf8;
    std::array<int16_t, 0x144> byte_of{};  // code point -> byte, -1 when not in the alphabet
    Tables() {
        byte_of.fill(-1);
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            codepoint[b] = maps_to_itself(b) ? static_cast<char32_t>(b) : next++;
            utf8_append(utf8[b], codepoint[b]);
            byte_of[codepoint[b]] = static_cast<int16_t>(b);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

char32_t byte_to_codepoint(uint8_t b) { return tables().codepoint[b]; }

void byte_level_encode(std::string_view raw, std::string& out) {
    const Tables& t = tables();
    for (char c : raw) out += t.utf8[static_cast<uint8_t>(c)];
}

void byte_level_decode(std::string_view encoded, std::string& out) {
    const Tables& t = tables();
    for (size_t pos = 0; pos < encoded.size();) {
        DecodedChar c = utf8_decode(encoded, pos);
        if (c.codepoint < t.byte_of.size() && t.byte_of[c.codepoint] >= 0)
            out += static_cast<char>(t.byte_of[c.codepoint]);
        else
            out.append(encoded.substr(pos, c.length));
        pos += c.length;
    }
}

}  // namespace pagoda::tokenizer
