// libFuzzer entry for image decoding (src/vision): PNG, JPEG and WebP bytes, and data: URLs. Any
// input must decode or throw pagoda::Error; a decoded image must have exactly width x height x 3
// bytes within the limits, and every byte is read so the sanitizers see a short buffer. The first
// byte picks the path: even -> the bytes as an image file, odd -> the rest as a data: URL.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "vision/data_url.h"
#include "vision/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    // Small limits: a header may claim any size, and the fuzzer must not spend its memory on one.
    const pagoda::vision::DecodeLimits limits{.max_bytes = 1 << 20, .max_pixels = 1 << 20};
    try {
        pagoda::vision::Image image;
        if (data[0] % 2 == 0) {
            image = pagoda::vision::decode_image({data + 1, size - 1}, limits, "fuzz");
        } else {
            image = pagoda::vision::decode_data_url_image(
                std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), limits, "fuzz");
        }
        if (image.width < 1 || image.height < 1 || uint64_t(image.width * image.height) > limits.max_pixels ||
            image.rgb.size() != size_t(image.width * image.height * 3))
            __builtin_trap();
        volatile uint64_t sum = 0;
        for (uint8_t v : image.rgb) sum = sum + v;
    } catch (const pagoda::Error&) {
    }
    return 0;
}
