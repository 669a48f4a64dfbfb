// Direct 2-D convolution for ungrouped convs with column stride 1 or 2 on AVX-512 machines: reads a
// zero-bordered copy of the input (Hp x Wp per channel) and writes the output with bias and
// activation, no im2col and no extra columns. 16 output columns per vector: one output row
// (the last one of a row masked when OW is not a multiple of 16), two rows when OW == 8.
// About twice the throughput of im2col + OpenBLAS on 16-32 channel maps.
#pragma once

#include <cstdint>

#include "cpu/conv_act.h"

namespace memlane::cpu {

// True when the CPU has AVX-512F (checked once) and the output width fits the kernel.
bool conv_direct_supported(int64_t OH, int64_t OW, int64_t sw);

// Floats read past the last padded plane (the caller zeroes them): loads are 16 or 32 wide.
inline int64_t conv_direct_slack(int64_t kw, int64_t dw) { return (kw - 1) * dw + 32; }

// The input layout conv_direct reads, zero-bordered (pads top pt, left pl): column stride 1,
// [C][Hp][Wp]; column stride 2, [C][2][Hp][(Wp+1)/2], each padded row split into its even and
// odd columns, so that every tap of a stride-2 output row is one contiguous load (no
// per-tap lane permutes). conv_direct_floats: its size including the zeroed slack.
int64_t conv_direct_floats(int64_t C, int64_t Hp, int64_t Wp, int64_t sw, int64_t kw, int64_t dw);
void conv_direct_fill(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                      int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad);
// The same for padded rows [r0, r1) of every channel only (the slack with the last rows), so that
// threads can each fill the rows their own output rows read.
void conv_direct_fill_rows(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                           int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad, int64_t r0, int64_t r1);
// Channels [c0, c1) of conv_direct_fill's layout, every row (the slack after the last plane
// with the last channel).
void conv_direct_fill_channels(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp,
                               int64_t Wp, int64_t sw, int64_t kw, int64_t dw, float* pad, int64_t c0, int64_t c1);

// pad: conv_direct_fill's layout; w: [M][C][kh][kw]; y: [M][OH][OW] = act(conv + bias + res),
// res (nullable): a residual laid out as y (a fused Add; it may be y itself). act: the folded
// activation (Relu, Clip, HardSwish, SiLU), applied in registers before the store.
void conv_direct(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t dh, int64_t dw, const float* bias, float* y, int64_t M, int64_t OH,
                 int64_t OW, const ConvAct& act, const float* res = nullptr);
// The same for output rows [oh0, oh1) only; oh0 a multiple of conv_direct_row_step(OW) (the
// kernel's vectors cover two rows when OW == 8).
int64_t conv_direct_row_step(int64_t OW);
void conv_direct_rows(const float* pad, int64_t C, int64_t Hp, int64_t Wp, const float* w, int64_t kh, int64_t kw,
                      int64_t sh, int64_t sw, int64_t dh, int64_t dw, const float* bias, float* y, int64_t M,
                      int64_t OH, int64_t OW, const ConvAct& act, const float* res, int64_t oh0, int64_t oh1);

}  // namespace memlane::cpu
