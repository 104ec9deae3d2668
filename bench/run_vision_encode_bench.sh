#!/usr/bin/env bash
# Image encode time per image, the vision tower alone, for random Gemma 3 projectors
# (gen-model --mmproj) at 64x64 (16 image tokens) and 256x256 (256 tokens):
#   bench/run_vision_encode_bench.sh [N] [THREADS]
# Builds build/vision_encode_bench by hand against build/libpagoda_*.a (see its header), then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
threads=${2:-1}
g++ -std=c++20 -O2 -I src -I . bench/vision_encode_bench.cpp -Wl,--start-group build/libpagoda_*.a \
  -Wl,--end-group -lfmt -lpng -lz -ljpeg -lwebp -lpcre2-8 -lssl -lcrypto -ldl -lpthread -o build/vision_encode_bench
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
for size in 64 256; do
  build/pagoda gen-model --arch gemma3 --layers 2 --dim 64 --heads 4 --kv-heads 2 -o "$dir/t$size.gguf" \
    --mmproj "$dir/mm$size.gguf" --mmproj-image-size "$size" >/dev/null 2>&1
  build/vision_encode_bench "$dir/mm$size.gguf" "$n" "$threads"
done
