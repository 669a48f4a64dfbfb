// A 1x1 conv and the depthwise conv that reads its output, run as one kernel: the inverted-
// residual pair of MobileNet v2/v3, MnasNet and EfficientNet (expand 1x1 -> depthwise). The
// kernel is the channel-blocked depthwise kernel computing its input bands from the 1x1 conv's
// input (conv_depthwise_blocked.h, DwPointwiseInput); this file finds the pair in a plan and
// builds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu/kernel.h"

namespace memlane::cpu {

// ops[i] a 1x1 Conv (stride 1, no pads, one group) with its activation (its own Relu, or the
// next op's Relu / Clip / HardSwish / SiLU), then the depthwise Conv of that result with its
// own likewise; every tensor between read nowhere else (not a graph output either), and the
// depthwise conv's output not over the 1x1 conv's input (the kernel reads that input while it
// writes). Ops only adjacent, as the epilogues' (cpu_backend.cc): a tensor alive in between
// could share arena bytes the fused kernel writes.
struct PointwiseDepthwise {
  size_t dw = 0;            // the depthwise conv's op index
  int32_t output = -1;      // the last tensor the chain writes (its activation's, or the conv's)
  ConvAct pw_act, dw_act;   // the folded activations (the ops' own Relu included)
  size_t skip = 0;          // ops after ops[i] the kernel runs too
};
bool pointwise_depthwise_chain(const Plan& plan, size_t i, PointwiseDepthwise* chain);

// The fused kernel for the chain at ops[i], or nullptr where it does not pay
// (pointwise_depthwise_pays) or does not apply (no AVX-512): the ops then build one by one.
std::unique_ptr<Kernel> make_pointwise_depthwise(const BuildCtx& bc, size_t i, const PointwiseDepthwise& chain);

}  // namespace memlane::cpu
