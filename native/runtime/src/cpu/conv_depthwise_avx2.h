// The depthwise conv's AVX2+FMA paths (8 outputs a vector), what x86-64 CPUs without AVX-512
// run: conv_depthwise.cc's AVX-512 ones on half the lanes. Without them such CPUs fell to the
// portable loop (one pass over the output row a tap, a scalar strided fill at column stride 2),
// ~4x slower than ONNX Runtime on MobileNet's stride-2 convs. AVX2+FMA is the library's
// baseline on x86-64 (-march=x86-64-v3), so these need no run-time check.
#pragma once

#include "cpu/conv_depthwise.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define MEMLANE_DW_AVX2 1

namespace memlane::cpu {

// Column stride 2: x [H][W] to the even and odd phase planes of scratch s (conv_depthwise.cc's
// layout); only the input's own positions are written, the zero border is the caller's.
void dw_fill_phases_s2_avx2(const DwGeom& g, const float* x, float* s);

// Column stride 1: x [H][W] into the padded plane of scratch s, row by row in vectors (the
// portable loop's copy of 14-float rows cost a third of a 14x14 channel's time). The zero
// border is the caller's; a row's last vector may write zeros over it and up to 7 floats past
// the plane (within conv_depthwise_scratch's slack).
void dw_fill_s1_avx2(const DwGeom& g, const float* x, float* s);

// One channel from its filled phase planes s: y [OH][OW] = act(conv + bias). Loads may run up to
// 7 floats past a plane row's last output (within conv_depthwise_scratch's slack).
void dw_channel_avx2(const DwGeom& g, const float* s, const float* w, float bias, float* y, const ConvAct& act);

}  // namespace memlane::cpu

#endif
