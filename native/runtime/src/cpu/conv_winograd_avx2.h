// Winograd F(2x2, 3x3) for ungrouped 3x3 stride-1 convs on CPUs without AVX-512 (AVX2+FMA:
// Zen 2/3, client Intel). There such convs ran padded im2col + OpenBLAS, 1.6x ONNX Runtime's
// time on ResNet-18 (whose CPU convs are direct, NCHWc, 8 lanes); Winograd does 2.25x fewer
// multiply-adds than any direct kernel. conv_winograd.h is the AVX-512 kernel; this one is its
// own file because its layout is built around 8-lane segments, not 16-lane masked blocks.
//
// A segment is 8 consecutive 2x2 output tiles of one tile row (lanes past the row's last tile
// compute on zeros and are not stored), or 4 of two rows on narrow maps (paired); a block is a
// few segments (3: 24 tiles, the AVX2 sgemm's register tile width). Each
// block: input transform (V = B^T d B, [16][C][8 x segments]) -> 16 products P = U V on the
// AVX2 sgemm (simd/avx2_gemm.h) -> output transform (A^T P A + bias (+ residual), the folded
// activation, stored as two output rows of 16 floats a segment). The transforms only add and
// halve, so results stay within ~1e-6 relative of the direct sum.
#pragma once

#include <cstdint>

#include "cpu/conv_act.h"

namespace memlane::cpu {

// One conv's geometry: the input [C][H][W] with pads pt (top) and pl (left), output [M][OH][OW]
// (the bottom and right pads are whatever makes OH, OW: the padded input is zero outside X).
struct WinogradAvx2Geom {
  int64_t C, H, W, M, OH, OW, pt, pl;
  int64_t tile_rows() const { return (OH + 1) / 2; }
  int64_t tiles_a_row() const { return (OW + 1) / 2; }
  // 3-4 tiles a row (5- to 8-wide maps: ResNet's last stage at 224 px): a segment holds two
  // tile rows, four lanes each, so that they fill it.
  bool paired() const { return tiles_a_row() >= 3 && tiles_a_row() <= 4; }
  int64_t segments_a_row() const { return paired() ? 1 : (tiles_a_row() + 7) / 8; }
  int64_t segments() const {  // one sample's
    return paired() ? (tile_rows() + 1) / 2 : tile_rows() * segments_a_row();
  }
};

// True when this build and CPU have the kernel (AVX2+FMA) and the shape pays for it: enough
// channels for the transforms, and tile rows that fill their 8-lane segments (see the .cc).
bool conv_winograd_avx2_supported(const WinogradAvx2Geom& g);

// Whether a conv's transformed weights (u_bytes: 16 x M x C/group floats, 16/9 of W) are
// small enough to hold. U is kept beside the plan (whose pages of W are given back) and read
// whole on every call: beyond 4 MiB (ResNet-18's 7x7 512 -> 512 convs, 16 MiB each) it added
// 25 MiB of RSS to the model and read more from DRAM than the multiply-adds it saved (batch 1:
// per op 5.2 -> 3.3-4.1 ms, the model's p50 no better). MEMLANE_WINOGRAD_AVX2_MAX_U_MIB
// overrides (A/B timing).
bool winograd_avx2_weights_fit(uint64_t u_bytes);

// Floats of one sample's zero-bordered input in the even/odd column layout the kernel reads.
int64_t winograd_avx2_pad_floats(const WinogradAvx2Geom& g);
// Scratch floats one thread's blocks need (V and P of one block).
int64_t winograd_avx2_scratch_floats(const WinogradAvx2Geom& g);
// Blocks of one sample.
int64_t winograd_avx2_blocks(const WinogradAvx2Geom& g);

// Channels [c0, c1) of one sample x ([C][H][W]) into pad (winograd_avx2_pad_floats).
void winograd_avx2_fill(const WinogradAvx2Geom& g, const float* x, float* pad, int64_t c0, int64_t c1);

// Output channels [m0, m1) of blocks [k0, k1) of one sample: y ([M][OH][OW]) = act(conv + bias
// + res). U: the transformed weights [16][M][C] (conv_winograd_weights). res (nullable) is laid
// out as y and may be y itself (each element is read before it is written); act then None or
// Relu. scratch: one thread's winograd_avx2_scratch_floats. (Threads share a sample's blocks,
// or where there are few its output channels: winograd_avx2_split_channels.)
void conv_winograd_avx2(const WinogradAvx2Geom& g, const float* pad, const float* U, const float* bias, float* y,
                        const float* res, const ConvAct& act, float* scratch, int64_t k0, int64_t k1, int64_t m0,
                        int64_t m1);

// Whether `slots` threads should each take a share of the output channels over every block
// (each transforming every block's input, reading only its rows of U) rather than a share of
// the blocks: where the blocks are too few to share evenly (ResNet's 7x7 maps: one block).
bool winograd_avx2_split_channels(const WinogradAvx2Geom& g, int64_t slots);

}  // namespace memlane::cpu
