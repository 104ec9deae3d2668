// The encoded-image cache through ImageInput (serve --image-cache-mb) on a random Gemma 3 and its
// random projector: a repeated picture skips the tower (its run count stays) and gives the same
// embeddings and hash as an uncached encode; another picture misses; the bound evicts the least
// recently used picture, which then runs the tower again.
#include <gtest/gtest.h>
#include <png.h>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/image_input.h"
#include "tokenizer/tokenizer.h"
#include "vision/image_encode.h"

namespace pagoda::server {
namespace {

struct Model {
    std::string text, mm;
    std::shared_ptr<const tokenizer::Tokenizer> tok;
};

// What ImageInput checks of the text model: its width (a Gemma 3: no deep-stack, no M-RoPE).
model::StepModelInfo text_model(int64_t dim) {
    model::StepModelInfo info;
    info.config.dim = dim;
    return info;
}

const Model& model() {
    static const Model m = [] {
        Model out{test::temp_path("image-cache-text.gguf"), test::temp_path("image-cache-mmproj.gguf"), nullptr};
        const auto r = test::run_pagoda({"gen-model", "--arch", "gemma3", "--layers", "2", "--dim", "64", "--heads", "4",
                                         "--kv-heads", "2", "-o", out.text, "--mmproj", out.mm});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        out.tok = tokenizer::Tokenizer::from_gguf(*gguf::File::open(out.text));
        return out;
    }();
    return m;
}

std::vector<uint8_t> png(uint16_t shade) {
    std::vector<uint16_t> px;
    for (int i = 0; i < 12 * 10; ++i) px.insert(px.end(), {shade, uint16_t((i * 5) % 256), 90});
    return test::encode_png(12, 10, PNG_COLOR_TYPE_RGB, 8, px);
}

constexpr int64_t kTokens = 16, kDim = 64;  // the random projector's image tokens, the text width

TEST(ImageCache, RepeatedPictureSkipsTheTowerWithIdenticalOutput) {
    ImageInput plain(model().mm, "cpu", 1, *model().tok, text_model(kDim));
    ImageInput cached(model().mm, "cpu", 1, *model().tok, text_model(kDim), 1 << 20);
    EXPECT_FALSE(plain.cache_stats()) << "no cache without a bound";

    const vision::EncodedImage want = plain.encode_bytes(png(9), "a");
    const vision::EncodedImage first = cached.encode_bytes(png(9), "a");
    EXPECT_EQ(cached.tower_runs(), 1u);
    const vision::EncodedImage again = cached.encode_bytes(png(9), "b");
    EXPECT_EQ(cached.tower_runs(), 1u) << "the second request for the picture did not run the tower";
    EXPECT_EQ(again.embeddings, first.embeddings);
    EXPECT_EQ(again.embeddings, want.embeddings) << "a hit is what the tower gives";
    EXPECT_EQ(again.hash, want.hash);
    EXPECT_EQ(again.embeddings.size(), size_t(kTokens * kDim));

    const vision::EncodedImage other = cached.encode_bytes(png(200), "c");
    EXPECT_EQ(cached.tower_runs(), 2u) << "another picture misses";
    EXPECT_NE(other.hash, first.hash);
    EXPECT_NE(other.embeddings, first.embeddings);

    const vision::ImageCacheStats s = *cached.cache_stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 2u);
    EXPECT_EQ(s.entries, 2u);

    // Without a cache every encode runs the tower.
    (void)plain.encode_bytes(png(9), "a");
    EXPECT_EQ(plain.tower_runs(), 2u);
}

TEST(ImageCache, TheBoundEvictsTheLeastRecentlyUsedPicture) {
    // Room for two pictures' embeddings.
    const uint64_t bound = 2 * vision::EncodedImageCache::entry_bytes(size_t(kTokens * kDim));
    ImageInput input(model().mm, "cpu", 1, *model().tok, text_model(kDim), bound);
    const auto a = input.encode_bytes(png(1), "a");
    (void)input.encode_bytes(png(2), "b");
    (void)input.encode_bytes(png(1), "a");  // a is now the most recent
    EXPECT_EQ(input.tower_runs(), 2u);
    (void)input.encode_bytes(png(3), "c");  // evicts b
    EXPECT_EQ(input.tower_runs(), 3u);
    (void)input.encode_bytes(png(1), "a");
    EXPECT_EQ(input.tower_runs(), 3u) << "a stayed";
    (void)input.encode_bytes(png(2), "b");
    EXPECT_EQ(input.tower_runs(), 4u) << "b was evicted and runs the tower again";
    const vision::ImageCacheStats s = *input.cache_stats();
    EXPECT_EQ(s.evictions, 2u);  // b for c, then c (least recent) for b
    EXPECT_EQ(s.entries, 2u);
    EXPECT_LE(s.bytes, bound);
    EXPECT_EQ(input.encode_bytes(png(1), "a").embeddings, a.embeddings);
}

TEST(ImageCache, CorruptImagesAreRefusedAndNotCached) {
    ImageInput input(model().mm, "cpu", 1, *model().tok, text_model(kDim), 1 << 20);
    std::vector<uint8_t> corrupt = png(9);
    corrupt.resize(corrupt.size() / 2);
    EXPECT_THROW(input.encode_bytes(corrupt, "messages[0].content[1]"), ApiError);
    EXPECT_EQ(input.tower_runs(), 0u);
    EXPECT_EQ(input.cache_stats()->entries, 0u);
}

}  // namespace
}  // namespace pagoda::server
