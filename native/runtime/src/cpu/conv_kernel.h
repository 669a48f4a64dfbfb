// The Conv kernel (2-D, NCHW) and what its paths share: the geometry, the sizing constants and
// the ConvKernel class. Its members are defined by concern, one file each:
//   conv.cc               make_conv (which path a conv takes), run / run_paths (the dispatch,
//                         the OpenBLAS pointwise path), workspace sizing, repacked weights
//   conv_pointwise.cc     the AVX-512 1x1 paths: run_pointwise_simd, run_pointwise_lanes,
//                         run_pointwise_split_input (batch 1, input channels split)
//   conv_avx512_paths.cc  the runners of the direct, flat and Winograd kernels (conv_direct.h,
//                         conv_flat.h, conv_winograd.h): run_direct, run_flat, run_winograd
//   conv_avx2_paths.cc    the runner of the AVX2 Winograd kernel (conv_winograd_avx2.h):
//                         run_winograd_avx2, for CPUs without AVX-512
//   conv_im2col.cc        the sgemm-on-columns paths: im2col, run_padded, run_product
//   conv_pixel_rows.cc    strided convs the direct kernel does not unroll: a tile of pixels'
//                         receptive fields on the packed panels (run_pixel_rows)
// Depthwise convs have their own kernel (conv_depthwise.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/conv_direct.h"
#include "cpu/conv_winograd_avx2.h"
#include "cpu/kernel.h"
#include "cpu/simd/gemm_panels.h"
#include "cpu/simd/pw_lanes.h"

namespace memlane::cpu {
class GroupedBlockedConv;  // conv_grouped_blocked.h
}

namespace memlane::cpu::conv_detail {

// Upper bound for the batched columns + product (floats); beyond it chunks shrink to one sample.
// Samples whose columns go into one sgemm: batch small images only while M*N*K stays
// under ~1e6, where OpenBLAS uses its unpacked small-matrix kernel; bigger products go
// through its packing path, which measured slower per flop on these convs.
constexpr int64_t kSmallProductMNK = 1000000;
inline int64_t small_product_samples(int64_t M, int64_t K, int64_t cols) {
  const int64_t per = std::max<int64_t>(1, M * K * cols);
  return std::max<int64_t>(1, kSmallProductMNK / per);
}
// The im2col columns an AVX2 product takes at a time (conv_im2col.cc): 128 KiB, a quarter of
// Zen 3's L2, so they stay there between im2col writing them and the product reading them;
// for K up to kIm2colBlockMaxK only. Beyond it (ResNet-18's 3x3 convs of 128-512 channels, K
// 1152-4608) a block is a row or two, and each product would stream the weights (up to 9 MiB)
// once more: a sample's columns are built at once, then the product, blocked
// (avx2_gemm_blocked) and split by output channels, reads the weights once a column block.
constexpr int64_t kIm2colBlockFloats = 32768;
constexpr int64_t kIm2colBlockMaxK = 256;
// The smallest map (pixels) a stride-1 conv without AVX-512 runs on the padded grid rather than
// im2col on the AVX2 kernel (conv.cc). ResNet-18's 3x3 convs with Winograd off, per-op minima,
// 1 thread, pinned, 2 rounds, padded / im2col: 56x56 (64 ch) 3.7-4.0 / 4.0-4.6 ms, 28x28 (128)
// 3.4-3.7 / 3.2-3.5, 14x14 (256) 3.6 / 3.3-3.5, and its 7x7 512-channel convs (which Winograd
// does not take) 5.4 / 3.4-3.5 (ORT: 3.4).
constexpr int64_t kAvx2PaddedMinP = 784;
// Multiply-adds a thread must get before the im2col path splits a conv's output rows.
constexpr int64_t kMinConvMacsPerThread = int64_t(1) << 20;
// Most output pixels a pixel-rows tile takes (conv_pixel_rows.cc).
constexpr int64_t kPixelRowsMaxTile = 256;
// Output bytes a sample from which the pixel-rows store bypasses the caches (conv_pixel_rows.cc):
// a core's L2 on the Xeons this was measured on (2 MiB); smaller outputs stay cached for the
// op that reads them next.
constexpr uint64_t kStreamStoreBytes = uint64_t(2) << 20;
// Floats of a padded input from which ConvKernel::fill_padded splits the copy over the threads
// (64 KiB: a few microseconds on one core, about what a hand-off to a polling worker costs).
constexpr int64_t kParallelFillFloats = 16384;
// Output channels from which the pixel-rows path takes convs that have another kernel too.
constexpr int64_t kPixelRowsMinChannels = 64;
// Taps (C x kh x kw) below which a conv the direct kernel takes stays on it.
constexpr int64_t kPixelRowsMinTaps = 64;
constexpr uint64_t kBatchedWorkspaceFloats = uint64_t(512) << 10;  // 2 MiB: stays in L2/L3

struct ConvGeom {
  int64_t C, H, W, M, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw, group;
  int64_t Cg() const { return C / group; }
  int64_t Mg() const { return M / group; }
  int64_t K() const { return Cg() * kh * kw; }
  int64_t P() const { return OH * OW; }
};

// Tap k's offset (k = (c*kh + i)*kw + j, the weights' order) from an output pixel's receptive-
// field origin in the zero-bordered [C][Hp][Wp] input: the pixel-rows path's implicit im2col.
std::vector<int32_t> pixel_rows_taps(const ConvGeom& g, int64_t Hp, int64_t Wp);

// y[m][p] = act(src[m][p] + b[m]) over Mg rows of P, src row stride lds.
// act: a folded activation, applied to each row while it is in cache.
inline void bias_act(float* y, const float* src, int64_t lds, const float* b, int64_t Mg, int64_t P,
                     bool relu, const ConvAct& act = {}) {
  for (int64_t m = 0; m < Mg; ++m) {
    const float bm = b ? b[m] : 0.f;
    float* yr = y + m * P;
    const float* sr = src + m * lds;
    if (relu)
      for (int64_t p = 0; p < P; ++p) { float v = sr[p] + bm; yr[p] = v > 0.f ? v : 0.f; }
    else
      for (int64_t p = 0; p < P; ++p) yr[p] = sr[p] + bm;
    conv_activate(yr, P, act);
  }
}

// Pointwise convs on simd::sgemm_nn: columns a block (see run_pointwise_simd), and the
// smallest map that takes it. Measured per layer against OpenBLAS (1 thread, thread CPU time,
// mobilenet_v2 / efficientnet_b0 shapes): 0.80-0.99x of OpenBLAS's time from 14x14 maps up,
// 1.05-1.08x on 7x7 maps (49 columns: one full 32-column step and a 17-wide tail).
constexpr int64_t kPwCols = 512;
constexpr int64_t kPwSimdMinP = 128;
// Without AVX-512, every pointwise conv takes the AVX2 sgemm (simd/avx2_gemm.h): with its dot
// tails and its blocked order for large weights (avx2_gemm_blocked) it beat OpenBLAS on
// all map sizes on Zen 3. Pinned, 1 thread, the pointwise convs' summed per-op minima, OpenBLAS
// under 128 pixels / the AVX2 sgemm everywhere, alternating, 3-4 rounds: regnet_x_400mf
// (7x7) 10.8-11.5 / 9.4-9.6 ms, mobilenet_v3_small 1.9-2.2 / 1.6 ms, shufflenet_v2_x0_5
// 0.9-1.2 / 0.8-1.0 ms; efficientnet_b0's squeeze-excite convs on 1x1 maps 412-424 / 323-350 us.
constexpr int64_t kPwSimdMinPAvx2 = 1;
// Pointwise convs with the output channels in the lanes (simd/pw_lanes.h): maps up to 32x32
// (MEMLANE_CONV_PW_LANES_MAXP overrides: a tuning aid), where the channels fill their 16-lane
// vectors at least as well as the pixels fill those of the pixels-in-lanes paths. Measured per
// layer against sgemm_nn / OpenBLAS (1 thread, min of 45 runs, mobilenet_v2 and
// efficientnet_b0): 0.68-0.83 on 7x7 maps, 0.77-0.88 on 14x14, 0.77-0.96 on 28x28; 1.12 on a
// 28x28 map with 40 output channels (48 lanes for 40) against 784 pixels in 49 full vectors,
// and 1.2-1.7 on 56x56 and 112x112 maps (the transposing store and 16/24-channel projections).
constexpr int64_t kPwLanesMaxP = 1024;
// A SIMD pointwise conv that sums at least kSplitInputMinRatio input channels per output
// channel, on a map of at most kSplitInputMaxPixels pixels or on any map whose producer splits
// a sample by channels (a Concat of channels, a pool), runs a batch of one on T threads by
// splitting its input channels (ConvKernel::run_pointwise_split_input). MobileNet's and
// EfficientNet's projections, SqueezeNet's squeezes, DenseNet's bottlenecks.
// At least kSplitInputMinShare input channels a thread: on fewer, writing and adding the
// partial sums costs more than the sums (squeezenet1_1's 64 -> 16 squeeze on 55x55 took 50 us
// at 2 threads split, 41 unsplit; its 128 -> 16 one 72 against 90).
constexpr int64_t kSplitInputMinRatio = 4;
constexpr int64_t kSplitInputMaxPixels = 256;
constexpr int64_t kSplitInputMinShare = 64;
inline bool pw_lanes_fit(int64_t M, int64_t P) {
  const auto ceil16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  return M * ceil16(P) >= P * ceil16(M);  // M / ceil16(M) >= P / ceil16(P)
}

class ConvKernel final : public Kernel {
 public:
  ConvGeom g{};
  TensorRef x, y;
  TensorRef res;          // fused residual Add (has_res)
  bool has_res = false;
  const float* w = nullptr;
  const float* b = nullptr;
  bool relu = false;
  ConvAct act;             // a folded activation other than Relu (applied after the product)
  bool pointwise = false;  // 1x1, no pad, group 1: no im2col
  // A strided pointwise conv (ResNet-50's and RegNet's downsampling projections): run() first
  // gathers the pixels it reads into the workspace ([N][C][OH*OW], a quarter of X at stride 2),
  // then the pointwise paths run on that as on a stride-1 input.
  bool subsample = false;
  bool pointwise_simd = false;  // pointwise on simd::sgemm_nn (conv_pointwise_simd's rule)
  bool pointwise_lanes = false;  // pointwise with the channels in the lanes (small maps)
  // X's producer splits a batch of one between threads by channels, the caller's first (a
  // Concat of channels: by bytes; a max or average pool: by planes)
  bool input_split_by_channels = false;
  simd::PwLanesWeights pwl;      // pointwise_lanes: W packed at load
  // Stride-1 convs compute on the padded-width grid: the input is copied once into a
  // zero-bordered plane (Hp x Wp) and every im2col row is then ONE contiguous copy of
  // OH*Wp floats; the Wp-OW extra columns of the product are dropped when the output is
  // written. Cheaper than a bounds-checked im2col of OW-wide segments (which cost as much
  // as the sgemm on 16x16 images).
  bool padded = false;
  bool direct = false;  // padded and conv_direct_supported: no im2col at all (conv_direct.h)
  bool winograd = false;  // 3x3 stride 1 with conv_winograd_supported (conv_winograd.h)
  // 3x3 stride 1 on a CPU without AVX-512, conv_winograd_avx2_supported (conv_winograd_avx2.h)
  bool winograd_avx2 = false;
  WinogradAvx2Geom wg{};  // winograd_avx2's geometry, of one group
  bool flat = false;      // padded, small maps without direct: the flattened grid (conv_flat.h)
  // Strided, ungrouped, without an unrolled direct kernel: pixels' receptive fields as the rows
  // of a product with W packed into panels (conv_pixel_rows.cc).
  bool pixel_rows = false;
  std::shared_ptr<const simd::PackedPanels> panels;  // pixel_rows: W [M][K] as [K][M] panels
  std::vector<int32_t> taps;  // pixel_rows: tap k's offset in the zero-bordered input (pixel_rows_taps)
  // Grouped convs (1 < channels a group) on the channel-blocked kernel (conv_grouped_blocked.h):
  // run_paths hands the whole conv to it.
  std::shared_ptr<const GroupedBlockedConv> grouped;
  std::vector<float> U;   // winograd: transformed weights [16][M][C]; winograd_avx2: [group][16][Mg][Cg]
  // winograd(_avx2), flat, pixel_rows: scratch slices, one a thread; the SIMD pointwise paths:
  // partial sums, one a thread (run_pointwise_split_input)
  int threads = 1;
  int64_t Hp = 0, Wp = 0, pb = 0, pr = 0;
  // The folded activation's output overlaps X (the planner gave it X's place, X dying here):
  // run() first copies the chunk's X to the front of the workspace, the paths then read that
  // copy (input()) and get the workspace after it. Costs one copy of X, saves the activation's
  // pass over the (larger) output.
  bool copy_input = false;
  // (A subsampled input is a copy too: a conv whose output overlaps X reads only the copy.)
  uint64_t input_copy_floats(int64_t batch) const {
    if (subsample) return uint64_t(batch * g.C * g.P() + 15) / 16 * 16;
    return copy_input ? uint64_t(batch * g.C * g.H * g.W + 15) / 16 * 16 : 0;
  }
  const float* input(const RunCtx& c) const { return copy_input || subsample ? c.workspace - input_copy_floats(c.batch) : x.at(c); }
  int64_t plane() const { return Hp * Wp; }
  // Floats of one sample's zero-bordered input in the column-stride-1 layout (conv_direct_fill),
  // rounded to whole vectors: what the flat and pixel-rows paths put before their scratch.
  int64_t padded_input_floats() const { return (conv_direct_floats(g.C, Hp, Wp, 1, g.kw, g.dw) + 15) / 16 * 16; }
  int64_t slack() const { return conv_direct_slack(g.kw, g.dw); }
  int64_t Pp() const { return g.OH * Wp; }  // columns per sample on the padded grid

  // Samples per chunk for the padded path.
  int64_t padded_chunk(int64_t batch) const {
    const uint64_t per = uint64_t(g.Cg() * plane() + (g.K() + g.Mg()) * Pp());
    int64_t s = per ? int64_t(kBatchedWorkspaceFloats / per) : batch;
    s = std::min(s, small_product_samples(g.Mg(), g.K(), Pp()));
    return std::clamp<int64_t>(s, 1, batch);
  }
  uint64_t padded_ws(int64_t s) const {
    return uint64_t(s * g.Cg() * plane() + slack() + (g.K() + g.Mg()) * Pp() * s);
  }

  // The activation the kernels apply in registers: the folded one (act) or the plan's Relu.
  ConvAct folded_act() const {
    ConvAct a = act;
    if (relu) a.kind = ConvAct::kRelu;
    return a;
  }
  ConvAct relu_act() const {
    ConvAct a;
    if (relu) a.kind = ConvAct::kRelu;
    return a;
  }

  // Samples per sgemm in the batched path.
  int64_t chunk(int64_t batch) const {
    const uint64_t per = uint64_t(g.K() + g.M) * g.P();
    int64_t s = per ? int64_t(kBatchedWorkspaceFloats / per) : batch;
    s = std::min(s, small_product_samples(g.M, g.K(), g.P()));
    return std::clamp<int64_t>(s, 1, batch);
  }

  uint64_t workspace_floats(int64_t maxBatch) const override { return input_copy_floats(maxBatch) + path_floats(maxBatch); }

  // conv.cc
  const char* path() const override;
  int64_t pointwise_panel() const;
  std::vector<const float*> repacked_weights() const override;
  uint64_t path_floats(int64_t maxBatch) const;
  void run(const RunCtx& c) const override;
  void run_paths(const RunCtx& c) const;
  // conv_pointwise.cc
  void gather_strided(const RunCtx& c, float* dst) const;  // subsample: X's strided pixels into dst
  void run_pointwise_simd(const RunCtx& c) const;
  void run_pointwise_lanes(const RunCtx& c) const;
  bool split_input_fits() const;  // run_pointwise_split_input's shapes (kSplitInput*)
  int64_t split_input_threads(const RunCtx& c) const;  // its threads for this run; 0: not this run
  void run_pointwise_split_input(const RunCtx& c, int64_t T) const;
  // conv_avx512_paths.cc
  // conv_direct_fill of sample xn into pad (column stride sw), its rows split over the pool's
  // threads where the padded input is large enough to pay for the hand-off.
  void fill_padded(const RunCtx& c, const float* xn, float* pad, int64_t sw) const;
  void run_direct(const RunCtx& c, const ConvAct& a, int64_t from = 0) const;
  void run_flat(const RunCtx& c) const;
  void run_winograd(const RunCtx& c) const;
  // conv_avx2_paths.cc
  int64_t winograd_avx2_pad_slice() const;  // the padded input's floats, whole vectors
  void run_winograd_avx2(const RunCtx& c) const;
  // conv_im2col.cc
  void run_padded(const RunCtx& c) const;
  bool run_product(const RunCtx& c) const;  // true when the folded activation (act) was applied too
  // conv_pixel_rows.cc
  int64_t pixel_rows_tile() const;
  uint64_t pixel_rows_floats() const;
  void run_pixel_rows(const RunCtx& c) const;
};

}  // namespace memlane::cpu::conv_detail
