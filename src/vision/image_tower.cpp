// open_image_tower (image_tower.h): the projector's config read once, then the tower of its family.
#include "vision/image_tower.h"

#include "vision/gemma4v_tower.h"
#include "vision/qwen3vl_tower.h"
#include "vision/vision_tower.h"

namespace pagoda::vision {

std::unique_ptr<ImageTower> open_image_tower(const gguf::File& file, backend::Backend& backend) {
    VisionConfig config = read_vision_config(file);
    if (config.qwen3vl()) return std::make_unique<Qwen3VlTower>(file, std::move(config), backend);
    if (config.gemma4v()) return std::make_unique<Gemma4vTower>(file, std::move(config), backend);
    return std::make_unique<VisionTower>(file, std::move(config), backend);
}

}  // namespace pagoda::vision
