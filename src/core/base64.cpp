// Standard base64 (see base64.h).
#include "core/base64.h"

#include <cctype>

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

std::string encode_base64(std::span<const uint8_t> bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t chunk = uint32_t(bytes[i]) << 16;
        if (i + 1 < bytes.size()) chunk |= uint32_t(bytes[i + 1]) << 8;
        if (i + 2 < bytes.size()) chunk |= uint32_t(bytes[i + 2]);
        out += kAlphabet[(chunk >> 18) & 63];
        out += kAlphabet[(chunk >> 12) & 63];
        out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
    }
    return out;
}

bool try_decode_base64(std::string_view text, std::vector<uint8_t>& out, std::string& problem) {
    out.clear();
    size_t n = text.size(), pad = 0;
    while (n > 0 && text[n - 1] == '=' && pad < 2) --n, ++pad;
    if (pad > 0 && (n + pad) % 4 != 0) {
        problem = fmt::format("'=' padding at offset {} does not end a group of 4", n);
        return false;
    }
    if (n % 4 == 1) {
        problem = fmt::format("{} characters is not a whole number of bytes", n);
        return false;
    }
    out.reserve(n / 4 * 3 + 2);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; ++i) {
        const int v = value_of(text[i]);
        if (v < 0) {
            const auto c = static_cast<unsigned char>(text[i]);
            problem = std::isprint(c) ? fmt::format("character '{}' at offset {}", char(c), i)
                                      : fmt::format("byte 0x{:02x} at offset {}", unsigned(c), i);
            out.clear();
            return false;
        }
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(uint8_t(acc >> bits));
            acc &= (1u << bits) - 1;
        }
    }
    return true;
}

std::vector<uint8_t> decode_base64(std::string_view text, std::string_view what) {
    std::vector<uint8_t> out;
    std::string problem;
    if (!try_decode_base64(text, out, problem)) fail("{}: invalid base64: {}", what, problem);
    return out;
}

}  // namespace pagoda
