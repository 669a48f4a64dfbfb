// Stride-1 convolution of small maps (OW < 12: the 7x7 and 13x13 maps at the end of 224-px
// CNNs) on the padded grid, flattened: output q = oh * Wp + ow of the zero-bordered input's
// grid reads input q + i*dh*Wp + j*dw for tap (i, j), so every tap of 16 consecutive grid
// points is one contiguous load whatever the row width; the Wp - OW columns past each row
// are computed and dropped. 8 output channels x 32 grid points a block, AVX-512 (picked at
// run time). Replaces the padded-grid sgemm, which ran at a third of the direct kernel's
// rate on [512 x 4608] x [4608 x 63] products (resnet layer4).
#pragma once

#include <cstdint>

namespace memlane::cpu {

inline constexpr int64_t kConvFlatMaxTaps = 64;

// True when the CPU has AVX-512F.
bool conv_flat_available();

// Scratch floats for the grid products of one call (8 channels at a time): 8 x the grid, rounded.
int64_t conv_flat_scratch(int64_t OH, int64_t Wp);

// pad: conv_direct_fill's column-stride-1 layout ([C][Hp][Wp] + slack) of one sample;
// w: [M][C][kh][kw]; y: [M][OH][OW] = act(conv + bias + res); res (nullable) laid out as y
// (it may be y itself). scratch: conv_flat_scratch floats.
void conv_flat(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
               int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH, int64_t OW, bool relu,
               const float* res, float* scratch);

}  // namespace memlane::cpu
