// Image resizing as PIL's Image.resize does it for 8-bit RGB, which is what Hugging Face's image
// processors call (transformers' image_transforms.resize goes through PIL), so pixels match theirs.
// resize_bicubic is PIL's BICUBIC (Keys' cubic with a = -0.5, support 2), what Qwen-VL's processor
// uses; the same framework otherwise (its negative lobes make the 8-bit clamp matter).
// Contract: resize_bilinear returns a width x height image; each axis is a separable convolution with
// the triangle filter whose support grows with the reduction factor (antialiased when shrinking,
// plain bilinear interpolation when growing), sampled at output pixel centres. Like PIL: fixed-point
// coefficients (22 fraction bits, rounded), the horizontal pass first, each pass rounded and clamped
// to 8 bits, and an axis whose size does not change is copied untouched.
#pragma once
#include <cstdint>

#include "vision/image.h"

namespace pagoda::vision {

Image resize_bilinear(const Image& in, int64_t width, int64_t height);
Image resize_bicubic(const Image& in, int64_t width, int64_t height);

}  // namespace pagoda::vision
