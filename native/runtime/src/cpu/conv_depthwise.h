// Depthwise 2-D convolution (group == C == M: one kxk filter a channel), the conv that
// MobileNet, EfficientNet, ShuffleNet and MnasNet are built on. Through im2col + sgemm it
// was a 1-row product per channel (26-37% of those models' time); here each channel is
// copied once into a zero-bordered plane, split by column phase for column stride s > 1
// (phase p holds padded columns p, p+s, p+2s, ...), so that every tap of an output row is
// one contiguous run; 16 outputs a vector on AVX-512 machines (picked at run time), 8 with AVX2
// elsewhere on x86-64 (conv_depthwise_avx2.h), a plain loop the compiler vectorises on others.
// Bias and the fused activation are applied while the channel's output is in cache.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/conv_act.h"

namespace memlane::cpu {

struct DwGeom {
  int64_t H, W, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw;
  // Padded plane, split in sw column phases of Wq floats each, Hp rows.
  // Rows and columns the taps reach: ((O-1)*s + (k-1)*d + 1), at least the padded input. (Inline:
  // the per-channel kernel asks for them a few times a channel, on 7x7 maps a few % of its time.)
  int64_t Hp() const { return std::max(pt + H, (OH - 1) * sh + (kh - 1) * dh + 1); }
  int64_t Wq() const {
    const int64_t wp = std::max(pl + W, (OW - 1) * sw + (kw - 1) * dw + 1);
    return (wp + sw - 1) / sw;
  }
};

// Offset of tap (i, j) of output (0, 0) in the phase layout (plane = Hp * Wq floats a phase).
inline int64_t dw_tap_offset(const DwGeom& g, int64_t plane, int64_t Wq, int64_t i, int64_t j) {
  const int64_t col = j * g.dw;
  return (col % g.sw) * plane + i * g.dh * Wq + col / g.sw;
}

// Threads a depthwise run wakes (at most min(threads, pool_threads, items)) for `items` work
// items of `madds` multiply-adds each: none for less than ~20k multiply-adds (tiny planes are
// not worth the wake-up). Both kernels split their items by this rule.
int64_t depthwise_threads(int64_t items, int64_t madds, int64_t threads, int64_t pool_threads);

// Scratch floats one call of conv_depthwise_channel needs (one padded plane + load slack).
int64_t conv_depthwise_scratch(const DwGeom& g);

// One channel: x [H][W] -> y [OH][OW] = act(conv(x, w[kh][kw]) + bias). scratch_bordered:
// scratch holds the previous channel's plane (same g), whose zero border is reused.
void conv_depthwise_channel(const DwGeom& g, const float* x, const float* w, float bias, float* y,
                            const ConvAct& act, float* scratch, bool scratch_bordered);

}  // namespace memlane::cpu

#include <memory>

#include "cpu/kernel.h"

namespace memlane::cpu {

// The Kernel over a batch: the channel-blocked one where it pays (conv_depthwise_blocked.h,
// AVX-512), else this per-channel one: samples x channels split among the pool's threads,
// each with its own scratch plane. x/y: [batch][C][H][W] / [batch][C][OH][OW]; w: [C][kh][kw].
std::unique_ptr<Kernel> make_depthwise_kernel(const DwGeom& g, int64_t C, TensorRef x, TensorRef y, const float* w,
                                              const float* bias, const ConvAct& act, int threads);

}  // namespace memlane::cpu
