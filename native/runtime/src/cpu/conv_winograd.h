// Winograd F(2x2, 3x3) for ungrouped 3x3 stride-1 convs on AVX-512 machines: 16 products of
// [M x C] by [C x tiles] replace the 9 taps, 2.25x fewer multiply-adds than the direct
// kernel (ONNX Runtime's CPU convs are direct, NCHWc). Tiles go through in blocks of 32
// (input transform -> 16 small products -> output transform, all in L1/L2), so the scratch
// is a few KiB per block, not a transformed copy of the whole map. The transforms only add
// and halve, so results stay within ~1e-6 relative of the direct sum.
#pragma once

#include <cstdint>
#include <vector>

namespace memlane::cpu {

// True when the CPU has AVX-512F and the shape fits: 3x3, stride 1, no dilation, and enough
// channels to pay for the transforms; then OW/2 of 8 or 16 tiles a row with a tile count that
// is a multiple of 32, or 8x8 maps (16 tiles: two samples share a block), or, in masked
// segments of one tile row (two rows for 6-7 tiles), 12-31 tiles a row (24- to 62-wide maps)
// or 6-7 (12- and 14-wide); odd OH or OW only in segments (ceil(OW / 2) tiles a row: 23- to
// 61-wide maps, 11 and 13).
bool conv_winograd_supported(int64_t C, int64_t M, int64_t OH, int64_t OW);

// U = G w G^T for every (m, c), laid out [16][M][C] (done once, at prepare).
std::vector<float> conv_winograd_weights(const float* w, int64_t M, int64_t C);

// Scratch floats one call needs (besides the padded input).
int64_t conv_winograd_scratch(int64_t C, int64_t M);

// Samples one call should take (2 for 8x8 maps, else 1).
int64_t conv_winograd_samples(int64_t OH, int64_t OW);

// The zero-bordered input's size conv_winograd reads: whole 2x2 tiles, so one more zero row
// (column) than the conv's pads give where OH (OW) is odd.
inline int64_t conv_winograd_pad(int64_t out) { return 2 * ((out + 1) / 2) + 2; }

// pad: `samples` inputs (padStride floats apart) in conv_direct_fill's column-stride-2 layout
// ([C][2][Hp][(Wp+1)/2], even and odd columns) of the zero-bordered input, Hp =
// conv_winograd_pad(OH), Wp = conv_winograd_pad(OW) (OH + 2, OW + 2 for even sizes). y: samples x [M][OH][OW] = act(conv + bias + res).
// slot/slots: this call computes the slot-th of `slots` equal shares of the tile blocks, or of
// the output channels where the blocks are few or U is large (conv_winograd.cc,
// winograd_split_channels) (slots = -1: all of it), so threads can split one map, each with
// its own scratch.
// res (nullable): a residual laid out as y, added before the activation (it may be y itself).
void conv_winograd(const float* pad, int64_t padStride, int64_t samples, int64_t C, const float* U, const float* bias,
                   float* y, int64_t M, int64_t OH, int64_t OW, bool relu, float* scratch, int64_t slot, int64_t slots,
                   const float* res = nullptr);

}  // namespace memlane::cpu
