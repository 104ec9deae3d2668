// core/base64: RFC 4648's test vectors both ways, decoding without padding, a random round trip of
// every length 0..64, and the refusals naming what and where.
#include "core/base64.h"

#include <random>

#include <gtest/gtest.h>

#include "core/error.h"

namespace pagoda {
namespace {

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

TEST(Base64, Rfc4648VectorsBothWays) {
    const std::pair<std::string_view, std::string_view> vectors[] = {
        {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
    for (const auto& [plain, coded] : vectors) {
        EXPECT_EQ(encode_base64(plain), coded);
        EXPECT_EQ(decode_base64(coded, "v"), bytes_of(plain)) << coded;
        std::string bare(coded);
        while (!bare.empty() && bare.back() == '=') bare.pop_back();
        EXPECT_EQ(decode_base64(bare, "v"), bytes_of(plain)) << "unpadded " << bare;
    }
    EXPECT_EQ(encode_base64(std::vector<uint8_t>{0xfb, 0xff, 0xbf}), "+/+/");
}

TEST(Base64, RandomBytesRoundTrip) {
    std::mt19937 rng(7);
    for (size_t n = 0; n <= 64; ++n) {
        std::vector<uint8_t> b(n);
        for (auto& x : b) x = uint8_t(rng());
        const std::string coded = encode_base64(b);
        EXPECT_EQ(coded.size(), (n + 2) / 3 * 4);
        EXPECT_EQ(decode_base64(coded, "r"), b) << n;
    }
}

TEST(Base64, RefusalsNameTheProblemAndWhere) {
    auto problem = [](std::string_view text) {
        std::vector<uint8_t> out{1, 2};
        std::string why;
        EXPECT_FALSE(try_decode_base64(text, out, why)) << text;
        EXPECT_TRUE(out.empty()) << "a refused text leaves no partial bytes";
        return why;
    };
    EXPECT_EQ(problem("Zm9v*mFy"), "character '*' at offset 4");
    EXPECT_EQ(problem(std::string_view("Zm\x01v", 4)), "byte 0x01 at offset 2");
    EXPECT_EQ(problem("Zm9vY"), "5 characters is not a whole number of bytes");
    EXPECT_EQ(problem("Zm9=="), "'=' padding at offset 3 does not end a group of 4");
    EXPECT_EQ(problem("Zg=a"), "character '=' at offset 2");  // '=' only at the end
    EXPECT_EQ(problem("Zg==="), "'=' padding at offset 3 does not end a group of 4");  // at most two are padding
    try {
        decode_base64("a*", "messages[0].content[1]");
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "messages[0].content[1]: invalid base64: character '*' at offset 1");
    }
}

}  // namespace
}  // namespace pagoda
