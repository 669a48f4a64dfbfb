// Channel-blocked depthwise conv for AVX-512 CPUs (the layout ONNX Runtime's MLAS computes
// depthwise convs in, NCHWc): 16 channels ride in the vector lanes, so every tap of every
// output is one 16-wide FMA whatever the map's width or the stride. The per-channel kernel
// (conv_depthwise.cc) vectorises 16 output columns of one channel instead: on the 7- and
// 14-wide maps of MobileNet / EfficientNet most of its lanes were idle and its per-channel
// plane copy cost more than the FMAs (a 5x5 dw on 7x7x1152 ran 5.8x ONNX Runtime's time).
//
// A block of 16 channels goes through three steps, one band of output rows at a time (so the
// scratch stays in L2 on 112x112 maps):
//   pack:    16 channel planes -> zero-bordered [rows][Wp][16] (16x16 register transposes),
//   compute: bias + taps with the prepacked [tap][16] weights into [rows][OW][16] (the folded
//            activation, any kind, applied in registers: act_vec16, conv_act_avx512.h),
//   unpack:  transposed back to the 16 planes.
// The next band is packed before this band is unpacked, which keeps an output written over its
// own input (the planner's in-place activation) correct: see inplace_safe_band().
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/conv_depthwise.h"
#include "cpu/kernel.h"

namespace memlane::cpu {

// The blocked kernel, or nullptr where the per-channel kernel is faster (3x3 convs with 24+
// output columns, and stride-2 convs over planes larger than L1: blocked_pays()) or it does
// not apply (no AVX-512, MEMLANE_CPU_NO_AVX512 or MEMLANE_DW_PER_CHANNEL set). MEMLANE_DW_BLOCKED=1 takes it for every depthwise conv (A/B
// timing; ctest runs the op suites both ways).
std::unique_ptr<Kernel> make_depthwise_blocked_kernel(const DwGeom& g, int64_t C, TensorRef x, TensorRef y,
                                                      const float* w, const float* bias, const ConvAct& act,
                                                      int threads);

}  // namespace memlane::cpu
