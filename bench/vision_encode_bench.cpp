// Image encode time, the vision tower alone: ms per image for an mmproj's tower (patch embedding,
// ViT blocks, pooling, projection) on a preprocessed image, decoding and resizing excluded.
//   vision_encode_bench MMPROJ.gguf [N] [THREADS] [BACKEND]
// Prints the median, min and max of N encodes (default 20) after one warm-up. A standalone
// program (excluded from pagoda_bench's glob); build it by hand against the library:
//   g++ -std=c++20 -O2 -I src -I . bench/vision_encode_bench.cpp -Wl,--start-group build/libpagoda_*.a \
//     -Wl,--end-group -lfmt -lpng -lz -ljpeg -lwebp -lpcre2-8 -lssl -lcrypto -ldl -lpthread -o build/vision_encode_bench
// bench/run_vision_encode_bench.sh writes random projectors at 64x64 and 256x256 and runs it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "vision/image.h"
#include "vision/image_encoder.h"
#include "vision/preprocess.h"

int main(int argc, char** argv) {
    using namespace pagoda::vision;
    if (argc < 2) {
        std::fprintf(stderr, "usage: vision_encode_bench MMPROJ.gguf [N] [THREADS] [BACKEND]\n");
        return 2;
    }
    const int n = argc > 2 ? std::stoi(argv[2]) : 20;
    const int threads = argc > 3 ? std::stoi(argv[3]) : 0;
    const std::string backend = argc > 4 ? argv[4] : "cpu";
    try {
        ImageEncoder encoder(argv[1], backend, threads);
        const VisionConfig& c = encoder.config();
        Image image;  // a 640x480 gradient: the content does not change the work
        image.width = 640;
        image.height = 480;
        image.rgb.resize(size_t(640 * 480 * 3));
        for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = uint8_t(i * 31 % 251);
        PreparedImage prepared{siglip_preprocess(image, c.image_size, c.patch_size, c.norm), 0};
        (void)encoder.run_tower(prepared);  // warm-up: packs, allocations
        std::vector<double> ms;
        for (int i = 0; i < n; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            const std::vector<float> out = encoder.run_tower(prepared);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            if (out.empty()) return 1;
        }
        std::sort(ms.begin(), ms.end());
        std::printf("%s: image %lldx%lld, %lld tokens, %s, threads %d: median %.2f ms, min %.2f, max %.2f (n=%d)\n", argv[1],
                    (long long)c.image_size, (long long)c.image_size, (long long)encoder.tokens_per_image(),
                    backend.c_str(), threads, ms[ms.size() / 2], ms.front(), ms.back(), n);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vision_encode_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
