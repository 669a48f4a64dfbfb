// Depthwise conv with column stride 2, one channel, straight from the input plane (AVX-512).
//
// The per-channel kernel (conv_depthwise.cc) first copies a channel into zero-bordered column
// phase planes, so that each tap is one contiguous run. At stride 2 that copy is as large as
// the input and the outputs are a quarter of it: on mobilenet_v2's 112x112 96-channel layer the
// copy's write and re-read made the op 0.66 ms against ONNX Runtime's 0.39 (per-op minima),
// where reading the 4.8 MB input once costs ~0.23 ms on this machine. Here each input row is
// read once a vector pair: 32 columns split into their even and odd lanes with two permutes,
// every tap a lane shift (valignd) of those, the borders zero through masked loads.
#pragma once

#include "cpu/conv_act.h"
#include "cpu/conv_depthwise.h"

namespace memlane::cpu {

// True when dw_channel_s2_direct handles g (column stride 2, column dilation 1, kernel width
// 3 or 5) and pays for it (an input plane over 24 KiB: kDirectMinPlaneFloats) on this CPU
// (AVX-512F). MEMLANE_DW_S2_PHASES=1: never (the phase-plane copy or the blocked kernel; A/B).
bool dw_s2_direct_applies(const DwGeom& g);

// One channel: x [H][W] -> y [OH][OW] = act(conv(x, w[kh][kw]) + bias). Needs no scratch.
void dw_channel_s2_direct(const DwGeom& g, const float* x, const float* w, float bias, float* y, const ConvAct& act);

}  // namespace memlane::cpu
