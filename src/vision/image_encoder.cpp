#include "vision/image_encoder.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/backend.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "vision/image.h"
#include "vision/image_tower.h"

namespace pagoda::vision {

ImageEncoder::ImageEncoder(const std::string& mmproj_path, const std::string& backend, int threads)
    : file_(gguf::File::open(mmproj_path)), backend_(backend::make_backend(backend, {.n_threads = threads})) {
    tower_ = open_image_tower(*file_, *backend_);
    // Which device encodes images is worth one line: the tower follows the model's backend.
    log_info("mmproj {}: {} vision tower on the {} backend", mmproj_path, tower_->config().projector, backend_->name());
    // Path, size and modification time: a file rewritten in place (gen-model again) is another projector.
    std::error_code ec;
    const std::string where = std::filesystem::weakly_canonical(mmproj_path, ec).string();
    const auto size = std::filesystem::file_size(mmproj_path, ec);
    const auto mtime = std::filesystem::last_write_time(mmproj_path, ec).time_since_epoch().count();
    const uint64_t facts[2] = {uint64_t(size), uint64_t(mtime)};
    projector_id_ = checksum64(where.data(), where.size(), checksum64(facts, sizeof facts));
}

ImageEncoder::~ImageEncoder() = default;

const VisionConfig& ImageEncoder::config() const { return tower_->config(); }

PreparedImage ImageEncoder::prepare(std::span<const uint8_t> bytes, std::string_view what) const {
    const Image image = decode_image(bytes, {}, what);
    TowerInput in = tower_->preprocess(image);
    PreparedImage out{.patches = std::move(in.patches), .grid_h = in.grid_h, .grid_w = in.grid_w};
    const uint64_t size[2] = {uint64_t(image.width), uint64_t(image.height)};
    out.hash = checksum64(image.rgb.data(), image.rgb.size(), checksum64(size, sizeof size));
    return out;
}

std::vector<float> ImageEncoder::run_tower(const PreparedImage& image) {
    ++tower_runs_;
    return tower_->encode(image.patches);
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

int64_t append_gemma4_image(std::vector<int32_t>& prompt, const Gemma3ImageTokens& ids, int64_t n_soft) {
    if (ids.start < 0 || ids.end < 0 || ids.soft < 0) fail("Gemma 4 image tokens are missing from the vocabulary");
    if (!ids.double_newline.empty()) fail("Gemma 4's image layout has no newlines around the image (internal error)");
    return append_gemma3_image(prompt, ids, n_soft);
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
