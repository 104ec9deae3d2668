// LoraSegment::bt_elems' layout (backend.h): B^T (rank x out) in tiles of kLoraBtTile outputs, each
// tile's rank rows of 16 values contiguous and the tiles in order, so the up pass over a range of
// outputs reads one contiguous block. A row-major B^T would read `rank` rows `out` values apart:
// L1 set conflicts at out = 1024 (4 KiB apart) and one short stream per rank row for the prefetcher.
// lora_bt_size values in all: the last tile's outputs past `out` are zeros.
#pragma once
#include <cstdint>

namespace pagoda::backend {

inline constexpr int64_t kLoraBtTile = 16;

constexpr int64_t lora_bt_index(int64_t rank, int64_t j, int64_t o) {
    return ((o / kLoraBtTile) * rank + j) * kLoraBtTile + o % kLoraBtTile;
}

constexpr int64_t lora_bt_size(int64_t rank, int64_t out) {
    return (out + kLoraBtTile - 1) / kLoraBtTile * kLoraBtTile * rank;
}

}  // namespace pagoda::backend
