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

// The 1x1 conv whose output the depthwise conv reads, fused in (cpu_backend.cc's
// pointwise_depthwise_chain, MobileNet's expand -> depthwise pair): each band's input rows are
// computed from the 1x1 conv's own input, 16 output channels in the lanes, straight into the
// band, instead of read from the arena. The expanded tensor (6x the block's input, 2.4 MB a
// sample at 112 px in mnasnet) is never written, read back or transposed. Rows a band shares
// with the next are carried over, not computed twice.
struct DwPointwiseInput {
  int64_t C = 0;             // the 1x1 conv's input channels
  TensorRef x;               // its input, [N, C, H, W] at the depthwise conv's H, W
  const float* w = nullptr;  // [M][C], M the depthwise conv's channels
  const float* b = nullptr;  // [M], or null
  ConvAct act;               // its activation (applied before the depthwise conv reads it)
};

// Whether the fused kernel pays over the two kernels apart (measured rule): AVX-512, and an
// expanded map (C channels of g.H x g.W) large enough that the 1x1 conv's output would leave
// L2 between them.
bool pointwise_depthwise_pays(const DwGeom& g, int64_t C);

// The blocked kernel, or nullptr where the per-channel kernel is faster (3x3 convs with 24+
// output columns, and stride-2 convs over planes larger than L1: blocked_pays()) or it does
// not apply (no AVX-512, MEMLANE_CPU_NO_AVX512 or MEMLANE_DW_PER_CHANNEL set).
// MEMLANE_DW_BLOCKED=1 takes it for every depthwise conv (A/B timing; ctest runs the op suites
// both ways). With `pointwise`, fused after that 1x1 conv whatever blocked_pays() says (the
// caller asked pointwise_depthwise_pays).
std::unique_ptr<Kernel> make_depthwise_blocked_kernel(const DwGeom& g, int64_t C, TensorRef x, TensorRef y,
                                                      const float* w, const float* bias, const ConvAct& act,
                                                      int threads, const DwPointwiseInput* pointwise = nullptr);

}  // namespace memlane::cpu
