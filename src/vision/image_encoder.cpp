#include "vision/image_encoder.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/backend.h"
#include "core/checksum.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/image.h"
#include "vision/preprocess.h"
#include "vision/qwen3vl_preprocess.h"
#include "vision/qwen3vl_tower.h"
#include "vision/vision_tower.h"

namespace pagoda::vision {

ImageEncoder::ImageEncoder(const std::string& mmproj_path, const std::string& backend, int threads)
    : file_(gguf::File::open(mmproj_path)), backend_(backend::make_backend(backend, {.n_threads = threads})) {
    if (read_vision_config(*file_).qwen3vl()) qwen_tower_ = std::make_unique<Qwen3VlTower>(*file_, *backend_);
    else tower_ = std::make_unique<VisionTower>(*file_, *backend_);
    // Path, size and modification time: a file rewritten in place (gen-model again) is another projector.
    std::error_code ec;
    const std::string where = std::filesystem::weakly_canonical(mmproj_path, ec).string();
    const auto size = std::filesystem::file_size(mmproj_path, ec);
    const auto mtime = std::filesystem::last_write_time(mmproj_path, ec).time_since_epoch().count();
    const uint64_t facts[2] = {uint64_t(size), uint64_t(mtime)};
    projector_id_ = checksum64(where.data(), where.size(), checksum64(facts, sizeof facts));
}

ImageEncoder::~ImageEncoder() = default;

const VisionConfig& ImageEncoder::config() const { return qwen_tower_ ? qwen_tower_->config() : tower_->config(); }

PreparedImage ImageEncoder::prepare(std::span<const uint8_t> bytes, std::string_view what) const {
    const Image image = decode_image(bytes, {}, what);
    const VisionConfig& c = config();
    PreparedImage out;
    if (c.qwen3vl()) {
        out.patches = qwen3vl_preprocess(image, c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
        out.grid_h = out.patches.grid_h / c.merge;
        out.grid_w = out.patches.grid_w / c.merge;
    } else {
        out.patches = siglip_preprocess(image, c.image_size, c.patch_size, c.norm);
        out.grid_h = out.grid_w = c.tokens_per_side();
    }
    const uint64_t size[2] = {uint64_t(image.width), uint64_t(image.height)};
    out.hash = checksum64(image.rgb.data(), image.rgb.size(), checksum64(size, sizeof size));
    return out;
}

std::vector<float> ImageEncoder::run_tower(const PreparedImage& image) {
    ++tower_runs_;
    return qwen_tower_ ? qwen_tower_->encode(image.patches) : tower_->encode(image.patches);
}

EncodedImage ImageEncoder::encode(std::span<const uint8_t> bytes, std::string_view what) {
    PreparedImage prepared = prepare(bytes, what);
    return {.embeddings = run_tower(prepared), .hash = prepared.hash, .grid_h = prepared.grid_h,
            .grid_w = prepared.grid_w};
}

EncodedImage ImageEncoder::encode_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("image {}: cannot be opened", path);
    const DecodeLimits limits;
    in.seekg(0, std::ios::end);
    const auto size = in.tellg();
    if (size < 0) fail("image {}: cannot be read", path);
    if (uint64_t(size) > limits.max_bytes) fail("image {}: {} bytes is over the limit of {}", path, uint64_t(size), limits.max_bytes);
    in.seekg(0);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    if (!in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()))) fail("image {}: cannot be read", path);
    return encode(bytes, path);
}

int64_t append_gemma3_image(std::vector<int32_t>& prompt, const Gemma3ImageTokens& ids, int64_t n_soft) {
    if (ids.start < 0 || ids.end < 0 || ids.soft < 0) fail("Gemma 3 image tokens are missing from the vocabulary");
    if (n_soft <= 0) fail("an image of {} soft tokens", n_soft);
    prompt.insert(prompt.end(), ids.double_newline.begin(), ids.double_newline.end());
    prompt.push_back(ids.start);
    const auto first = int64_t(prompt.size());
    prompt.insert(prompt.end(), size_t(n_soft), ids.soft);
    prompt.push_back(ids.end);
    prompt.insert(prompt.end(), ids.double_newline.begin(), ids.double_newline.end());
    return first;
}

}  // namespace pagoda::vision
