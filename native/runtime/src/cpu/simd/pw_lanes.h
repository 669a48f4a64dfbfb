// Pointwise (1x1) conv with the output channels in the vector lanes: Y^T = X^T W^T, W packed
// at load into panels of 32 output channels ([C][32] each, zero-padded), the product tile
// (8 pixels x 32 channels) finished in registers (bias, activation) and transposed into NCHW
// on the store. For small maps (7x7 = 49 pixels) the pixels-in-lanes product (simd::sgemm_nn,
// OpenBLAS) wastes a quarter of its lanes on the column tail. Output channel counts that are not
// a multiple of 32 (mobilenet_v2's 24, efficientnet_b0's 40) end in a zero-padded last panel.
// Needs have_avx512().
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/aligned_floats.h"
#include "cpu/conv_act.h"

namespace memlane::cpu::simd {

inline constexpr int64_t kPwLanesPanel = 32;  // output channels a panel
// Input channels of one K block (a [128][32] slice of a panel is 16 KiB: L1 with room for X and
// the running sums; blocks of 256 measured no faster than none on squeezenet's classifier),
// and the most pixels whose running sums a K-blocked pass keeps between blocks (32 KiB).
inline constexpr int64_t kPwLanesKBlock = 128;
inline constexpr int64_t kPwLanesKBlockPixels = 256;

struct PwLanesWeights {
  AlignedFloats w;  // [panels][C][32], each panel row on a cache line
  AlignedFloats b;  // [panels * 32], zeros where the conv has no bias
  int64_t M = 0, C = 0;
  int64_t panels() const { return (M + kPwLanesPanel - 1) / kPwLanesPanel; }
};

// Packs W [M][C] (row-major) and the bias (may be null).
PwLanesWeights pw_lanes_pack(const float* w, const float* b, int64_t M, int64_t C);

// One panel of one sample: Y[m][p] = act(sum_c W[m][c] X[c][p] + b[m] (+ R[m][p])) for the
// panel's channels m (below M) and pixels p in [p0, p1). X is [C][P], Y and R [M][P].
// R (nullable): a fused residual Add, read just before the same element of Y is written, so it
// may be Y itself; with it the activation (then kNone or kRelu only: the Add's Relu) comes
// after the sum.
void pw_lanes(const PwLanesWeights& pw, int64_t panel, const float* X, float* Y, int64_t P, int64_t p0, int64_t p1,
              const ConvAct& act, const float* R = nullptr);

// pw_lanes over panels `panel` and `panel + 1` at once (which must exist), in tiles of 6 pixels
// x 64 channels: fewer loads a multiply-add than one panel's 8 x 32 tiles. The same sums in
// the same order as pw_lanes, panel by panel.
void pw_lanes_pair(const PwLanesWeights& pw, int64_t panel, const float* X, float* Y, int64_t P, int64_t p0,
                   int64_t p1, const ConvAct& act, const float* R = nullptr);

// Partial sums for a split of the input channels between threads (conv_pointwise.cc): Y[m][p] =
// sum over c in [c0, c1) of W[m][c] X[c][p] for every output channel m and pixel p, without the
// bias, activation or residual. X is [C][P], Y [M][P].
void pw_lanes_partial(const PwLanesWeights& pw, const float* X, float* Y, int64_t P, int64_t c0, int64_t c1);

}  // namespace memlane::cpu::simd
