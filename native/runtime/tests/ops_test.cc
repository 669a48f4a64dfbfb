// Each CPU op against a naive reference or hand-computed values on small tensors.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cpu/simd/avx2_gemm.h"
#include "depthwise_path.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using memlane::Status;
using V = std::vector<float>;
using S = std::vector<int64_t>;

struct ConvCase {
  const char* label;
  int64_t n, C, H, W, M, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g;
  bool bias, relu;
};

static V conv_ref(const ConvCase& c, const V& x, const V& w, const V& b, int64_t OH, int64_t OW) {
  V y(size_t(c.n * c.M * OH * OW));
  const int64_t Cg = c.C / c.g, Mg = c.M / c.g;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = c.bias ? b[m] : 0;
          const int64_t gi = m / Mg;
          for (int64_t cc = 0; cc < Cg; ++cc)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                int64_t ih = oh * c.sh - c.pt + i * c.dh, iw = ow * c.sw - c.pl + j * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += double(x[((n * c.C + gi * Cg + cc) * c.H + ih) * c.W + iw]) * w[((m * Cg + cc) * c.kh + i) * c.kw + j];
              }
          float v = float(s);
          y[((n * c.M + m) * OH + oh) * OW + ow] = c.relu ? std::max(v, 0.f) : v;
        }
  return y;
}

static void test_conv() {
  const ConvCase cases[] = {
      {"3x3 pad1 bias relu", 2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"strided dilated asym pads", 3, 2, 9, 8, 5, 3, 2, 2, 3, 1, 0, 2, 1, 2, 2, 1, true, false},
      {"grouped", 2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true, false},
      {"depthwise", 2, 4, 6, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, false, true},
      {"pointwise", 3, 5, 4, 4, 7, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      // pointwise on simd::sgemm_nn (maps of 128+ columns): row and column tails, rows split
      // between threads (one panel), several 512-column panels with a tail
      {"pointwise simd 11x13, 13 rows", 3, 7, 11, 13, 13, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise simd 25x43, 2 panels + tail", 2, 19, 25, 43, 21, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false},
      {"pointwise simd one sample, 40 rows", 1, 33, 12, 12, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
      {"pointwise simd K 600 in slices, 29 rows, 11x13", 2, 600, 11, 13, 29, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"batched small images", 9, 1, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      // K over 256 on small maps: without AVX-512, im2col on the AVX2 kernel with the sample's
      // columns built first and the product split by blocks of 24 output channels (50 = 24 +
      // 24 + 2); the stride-1 5x5 one leaves the padded grid there (a map under 784 pixels)
      {"im2col K 288 stride 2, 14x14 -> 7x7, 50 channels", 2, 32, 14, 14, 50, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"im2col K 300 5x5 stride 1, 10x10, 30 channels", 1, 12, 10, 10, 30, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1, false, false},
      {"5x5 no bias", 1, 2, 10, 10, 3, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false},
      {"stride-1 dilated asym pads", 3, 3, 7, 9, 4, 3, 2, 1, 1, 2, 0, 1, 3, 2, 3, 1, true, true},
      {"stride-1 grouped dilated", 2, 6, 6, 6, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 3, true, false},
      {"batched padded, many samples", 70, 2, 4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct 16-wide, channel remainder", 2, 3, 16, 16, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct 32-wide 5x3 dilated", 1, 4, 12, 32, 9, 5, 3, 1, 1, 2, 1, 6, 1, 2, 1, 1, false, false},
      {"direct 8-wide pairs of rows", 3, 16, 8, 8, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"direct stride 2, 16-wide", 2, 4, 32, 32, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct stride 2, pairs of 8-wide rows", 2, 16, 16, 16, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"direct stride (2,1) dilated", 1, 5, 17, 20, 8, 3, 3, 2, 1, 1, 0, 1, 0, 1, 2, 1, false, true},
      {"direct, channel blocks split over threads", 2, 16, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct 1x1 stride 2", 2, 16, 16, 16, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, true, false},
      // at 2 threads the direct kernel splits these by bands of output rows (the input 16x the
      // weights or more, conv_avx512_paths.cc): each thread fills its band's padded rows. A
      // stride-2 stem, an odd row count with a masked last vector a row, 8-wide pairs of rows.
      // One sample each: a batch of 2 at 2 threads runs a sample a lane, each lane serial.
      {"direct stem 3->16 stride 2, row bands", 1, 3, 64, 64, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct 45 rows 30-wide, uneven row bands", 1, 2, 45, 30, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"direct 8-wide pairs of rows, row bands", 1, 2, 36, 8, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      // strided 1x1 convs on the pointwise paths, their pixels gathered first (gather_strided):
      // stride-2 rows in permuted pairs of vectors with a scalar tail (67 and 112 wide), the
      // scalar gather (stride 3, stride (2,1)), on sgemm_nn, the lanes and OpenBLAS
      {"pointwise stride 2 gathered, 67-wide rows (sgemm_nn)", 2, 9, 9, 67, 21, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, true, true},
      // one sample whose gather (64 channels of 28x28) the pool splits over 2 threads
      {"pointwise stride 2 gathered, channels split over threads", 1, 64, 56, 56, 40, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise stride (1,2) gathered, 112-wide, 3 samples", 3, 5, 4, 112, 19, 1, 1, 1, 2, 0, 0, 0, 0, 1, 1, 1, false, true},
      {"pointwise stride 3 gathered (lanes)", 2, 7, 10, 11, 33, 1, 1, 3, 3, 0, 0, 0, 0, 1, 1, 1, true, false},
      {"pointwise stride (2,1) gathered, odd map (OpenBLAS)", 2, 6, 15, 13, 10, 1, 1, 2, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"winograd 8x8, a pair of samples and a lone one", 3, 16, 8, 8, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd 8x8 asym pads, four samples", 4, 9, 7, 9, 8, 3, 3, 1, 1, 2, 0, 1, 1, 1, 1, 1, false, false},
      {"winograd 32x32, channel remainders 4 and 1", 2, 9, 32, 32, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd 16x16 asym pads, no bias", 1, 8, 15, 17, 8, 3, 3, 1, 1, 2, 0, 1, 1, 1, 1, 1, false, false},
      {"winograd 16x32 no pads", 2, 12, 18, 34, 16, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
      // Winograd in masked segments (tile rows of 12-31 tiles but 16)
      {"winograd segments 56-wide, 16 + 12 tiles a row", 2, 8, 10, 56, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd segments 28x28 asym pads, three samples", 3, 9, 28, 27, 8, 3, 3, 1, 1, 1, 0, 1, 3, 1, 1, 1, false, false},
      {"winograd segments 2x24 maps, a pair and a lone sample", 3, 8, 2, 24, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd segments 62-wide, 31 tiles a row", 1, 10, 4, 62, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      {"winograd segments 14x14, two tile rows a segment, odd row count", 2, 12, 14, 14, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd segments 12x14 asym pads, no bias", 3, 8, 13, 14, 9, 3, 3, 1, 1, 0, 1, 1, 1, 1, 1, 1, false, false},
      // Winograd on odd maps (squeezenet's 55-, 27- and 13-wide Fire maps): ceil(OW / 2) tiles a
      // row, the last tile's second column / the last tile row's second row not stored
      {"winograd odd 55x55, 28 tiles a row (16 + 12)", 1, 16, 55, 55, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd odd 27x27, two samples", 2, 8, 27, 27, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"winograd odd 13x13, two 7-tile rows a segment, three samples", 3, 9, 13, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      {"winograd odd 9x11 asym pads (6 tiles a row)", 2, 8, 10, 12, 9, 3, 3, 1, 1, 0, 1, 1, 0, 1, 1, 1, true, true},
      {"winograd odd width, even height 8x25, no pads", 2, 10, 10, 27, 8, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false},
      {"winograd odd height, even width 7x30", 1, 12, 7, 30, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd odd 1x13 map, one tile row", 2, 8, 1, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      // Winograd on CPUs without AVX-512 (conv_winograd_avx2.cc; on AVX-512 machines in
      // ops_test_portable): tile rows in 8-lane segments (20 tiles: 3 segments, 4 of them masked),
      // 7 segments shared 3/2/2 among blocks, two tile rows a segment on 7x7 (an odd tile-row
      // count) and 5x6 maps, many channels (the product's row tail), a left-only pad
      {"winograd avx2 40-wide, 3 segments a row", 2, 9, 11, 40, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd avx2 14x14, 7 segments in 3 blocks", 1, 24, 14, 14, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"winograd avx2 paired 7x7, odd tile rows, 3 samples", 3, 16, 7, 7, 21, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      {"winograd avx2 paired 5x6 (3 tiles a row)", 2, 8, 5, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd avx2 300 -> 37 channels, 12x12", 1, 300, 12, 12, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"winograd avx2 left pad only, 24x30 -> 22x29", 2, 11, 24, 30, 9, 3, 3, 1, 1, 0, 1, 0, 0, 1, 1, 1, false, false},
      // at 2 threads, one sample: few blocks, so the threads share the output channels (40: 16 +
      // 24; 35: 16 + 19) over every block, each transforming the input itself
      {"winograd avx2 7x7 40 channels, split by channels", 1, 16, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"winograd avx2 14x14 35 channels, split by channels", 1, 12, 14, 14, 35, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      // grouped, group by group (RegNet's 16-24 channels a group), (group, block) units shared
      // by the threads; a U over 4 MiB (320 -> 320) stays on the padded sgemm
      {"winograd avx2 grouped 2x(16->24), 28x28", 2, 32, 28, 28, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true, true},
      {"winograd avx2 grouped 3x(8->8) 14x14, one sample", 1, 24, 14, 14, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, false, true},
      {"3x3 320 -> 320 on 7x7 (U over the Winograd cap)", 1, 320, 7, 7, 320, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      // strided grouped 3x3 (im2col, the AVX2 product for K <= 256)
      {"im2col grouped 2x(16->16) stride 2, 30x30", 2, 32, 30, 30, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true, true},
      // the AVX2 product's blocks of rows (kIm2colBlockFloats): 144 x 44 columns a row, 5 rows a
      // block, 44 rows (a last block of 4); a 7x7 stride-2 stem, 147 x 50 a row, 4 rows a block
      {"im2col grouped 2x(16->16) stride 2, 88x88, blocks of rows", 1, 32, 88, 88, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true, true},
      {"im2col 7x7 stride 2 stem 3->8, 100x100, blocks of rows", 1, 3, 100, 100, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, false},
      {"direct stride 2, odd padded width", 2, 3, 31, 32, 9, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, true},
      {"direct stride 2 dilated, right pad only", 1, 4, 20, 34, 8, 3, 3, 2, 2, 0, 0, 2, 1, 2, 2, 1, false, false},
      {"direct stride 2 pairs, odd padded width", 2, 5, 16, 16, 12, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 1, true, true},
      // direct kernel with a masked last vector a row (OW not a multiple of 16)
      {"direct tail 21-wide", 2, 5, 13, 21, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"direct tail stride 2, 29-wide", 2, 6, 30, 58, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, false},
      {"direct tail 5x5 14-wide, dilated rows", 1, 3, 18, 14, 4, 5, 5, 1, 1, 2, 2, 2, 2, 2, 1, 1, false, true},
      {"direct tail 56-wide, 7x7 stride 2", 1, 3, 61, 111, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, true},
      // grouped convs on the direct kernel, group by group (channel blocks crossing groups)
      {"direct grouped 4x(4->12), 20-wide", 2, 16, 9, 20, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, true, true},
      {"direct grouped stride 2, 16 channels a group", 1, 32, 28, 28, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true, false},
      // flattened padded grid (conv_flat.cc): small stride-1 maps
      {"flat 7x7 maps, 20 channels, two samples", 2, 16, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {"flat 13x11 5x3 dilated asym pads", 1, 5, 13, 11, 9, 5, 3, 1, 1, 2, 1, 3, 0, 1, 2, 1, false, false},
      {"flat 3x3 1-wide rows, no pads", 3, 4, 6, 3, 5, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
      // depthwise kernel (conv_depthwise.cc): row tails, column phases, taps past the input
      {"depthwise 3x3 odd 37x23, bias", 3, 5, 37, 23, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 5, true, false},
      {"depthwise 5x5 stride 2 odd, relu", 2, 7, 19, 33, 7, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 7, true, true},
      {"depthwise 3x3 stride (2,3) dilated asym", 2, 3, 21, 40, 3, 3, 3, 2, 3, 0, 2, 3, 1, 2, 2, 3, false, false},
      {"depthwise 7x5 no pads, 1-wide output", 1, 4, 9, 5, 4, 7, 5, 1, 1, 0, 0, 0, 0, 1, 1, 4, true, true},
      {"depthwise channel multiplier 2 (grouped path)", 2, 3, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, true, false},
      {"depthwise 3x3 stride 2, 112 wide, many channels", 2, 24, 14, 112, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 24, true, true},
      {"depthwise 5x5 stride 1, 20-wide rows (shifted taps)", 2, 6, 20, 20, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 6, true, false},
      {"depthwise 3x3 stride (2,1) 33-wide, row dilation 2", 1, 3, 17, 33, 3, 3, 3, 2, 1, 2, 1, 2, 1, 2, 1, 3, false, true},
      // per-channel depthwise on large maps (planes past L1), channels one after another in one
      // scratch whose border is reused: stride 2, dilation, asymmetric pads, odd sizes
      {"depthwise 3x3 80x72, 3 channels", 2, 3, 80, 72, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, true, true},
      {"depthwise 3x3 stride 2 112x112", 1, 2, 112, 112, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true, false},
      {"depthwise 3x3 stride 2 odd 101x97 asym pads", 2, 3, 101, 97, 3, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 3, false, true},
      {"depthwise 3x3 dilated 2, 70x64", 1, 2, 70, 64, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 2, true, false},
      {"depthwise 1x3 stride (1,2) 90x100", 2, 2, 90, 100, 2, 1, 3, 1, 2, 0, 1, 0, 1, 1, 1, 2, true, true},
      {"depthwise 3x3 60x126", 1, 2, 60, 126, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true, false},
      // stride-2 depthwise read straight from planes past 24 KiB (conv_depthwise_s2_avx512.cc):
      // 5x5 with row dilation and asymmetric pads, an output row of 150 (a chunk of 8 vectors
      // and one of 2), no pads with an odd width (the last vector's lookahead past the row), a
      // left pad wider than the kernel's half, a 1-row kernel
      {"dw s2 direct 5x5 100x98, row dilation 2, pads 2/2/1/1", 2, 5, 100, 98, 5, 5, 5, 2, 2, 2, 2, 1, 1, 2, 1, 5, true, true},
      {"dw s2 direct 3x3 30x300, 150 outputs a row", 1, 3, 30, 300, 3, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 3, true, false},
      {"dw s2 direct 3x3 99x65, no pads", 2, 4, 99, 65, 4, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 4, false, true},
      {"dw s2 direct 5x5 80x90, left pad 4, right 3", 1, 3, 80, 90, 3, 5, 5, 2, 2, 1, 4, 2, 3, 1, 1, 3, true, false},
      {"dw s2 direct 1x5 stride (3,2) 70x120", 2, 2, 70, 120, 2, 1, 5, 3, 2, 0, 2, 0, 2, 1, 1, 2, true, true},
      // channel-blocked depthwise (conv_depthwise_blocked.cc, AVX-512): 16 channels a vector with
      // a partial last block, runs of output columns (7+7, 8+7+...), bands of output rows on
      // maps too large for one (60x50, 61x47), stride 2, dilation, asymmetric pads
      {"dw blocked 5x5 7x7 maps, 37 channels", 2, 37, 7, 7, 37, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 37, true, true},
      {"dw blocked 3x3 stride 2, 14->7, 20 channels", 3, 20, 14, 14, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 20, true, false},
      {"dw blocked 3x3 60x50 in bands, 17 channels", 1, 17, 60, 50, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 17, false, true},
      {"dw blocked 5x5 stride 2 dilated 61x47 bands", 2, 18, 61, 47, 18, 5, 5, 2, 2, 3, 1, 4, 2, 2, 1, 18, true, false},
      {"dw blocked 3x5 stride (1,2) asym pads, 9 channels", 2, 9, 23, 29, 9, 3, 5, 1, 2, 0, 2, 2, 1, 1, 1, 9, true, true},
      {"dw 3x3 one block of 16, 112x112 stride 2 (s2 direct; blocked under MEMLANE_DW_BLOCKED)", 1, 16, 112, 112, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 16, true, true},
      {"dw 1x1 stride 2, 19 channels", 2, 19, 9, 11, 19, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 19, true, false},
      {"dw 3x3 28-wide (per-channel, two rows a pass), odd rows", 2, 21, 27, 28, 21, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 21, true, true},
      {"dw 3x3 two rows a pass, column dilation 2, 30-wide", 2, 5, 13, 30, 5, 3, 3, 1, 1, 1, 2, 1, 2, 1, 2, 5, true, false},
      // per-channel on CPUs without AVX-512 (conv_depthwise_avx2.cc, 8 lanes): stride-2 fills
      // with 16-input tails of 1 and 15 (W 17, 31), row tails of 1-7 outputs, both phases
      // first (pl 0 / 1), a last output row alone, 7x7 taps cached, 9x9's read from the filter
      {"dw 3x3 stride 2, 17-wide (fill tail 1, 9 outputs)", 2, 4, 9, 17, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, true, true},
      {"dw 3x3 stride 2, 31-wide, no left pad", 1, 3, 11, 31, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 3, true, false},
      {"dw 5x5 stride 1, 13-wide", 2, 3, 10, 13, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 3, true, true},
      {"dw 5x5 stride 2, 13-wide, column dilation 2", 1, 3, 15, 13, 3, 5, 5, 2, 2, 2, 4, 2, 4, 1, 2, 3, false, true},
      {"dw 7x7 19-wide, 7 rows", 1, 2, 7, 19, 2, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 2, true, false},
      {"dw 9x9 (taps not cached) 21-wide", 1, 2, 12, 21, 2, 9, 9, 1, 1, 4, 4, 4, 4, 1, 1, 2, true, true},
      // square 3/5/7 taps in passes of output rows (channel_cols: 8 a pass, 6 at 7x7), the
      // last pass short: 21 = 8 + 8 + 5, 18 = 8 + 8 + 2, 12 = 6 + 6, 9 = 6 + 3
      {"dw 5x5 stride 1, 21 rows (passes 8 8 5)", 2, 2, 21, 11, 2, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 2, true, false},
      {"dw 3x3 stride 2, 35 rows (passes 8 8 2)", 1, 2, 35, 20, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true, true},
      {"dw 7x7 stride 2, 23x26 (passes 6 6)", 1, 3, 23, 26, 3, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 3, true, true},
      {"dw 7x7 stride 1, 9x30 (passes 6 3)", 2, 2, 9, 30, 2, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 2, true, false},
      // products large enough for the pool to split at 2 threads: the im2col path's output
      // rows (grouped, 3 channels a group: not direct), a 7x7 pointwise product's rows
      {"im2col grouped 7x7 stride 2, rows split over threads", 1, 6, 64, 64, 32, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 2, true, false},
      {"pointwise 7x7 map, product split over threads", 1, 192, 7, 7, 1152, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      // pixel rows (conv_pixel_rows.cc): strides the direct kernel lacks (4, 3), patchify (k ==
      // stride), 64+ channels on any taps but Winograd's; partial 32-channel panels and 16-channel
      // store blocks (40, 70), tiles of 256 pixels with a tail (1 760 pixels), padding on every side
      {"pixel rows 11x11 stride 4 pad 2, 64 channels", 2, 3, 35, 35, 64, 11, 11, 4, 4, 2, 2, 2, 2, 1, 1, 1, true, true},
      {"pixel rows 4x4 patchify stride 4, 40 channels", 3, 3, 16, 20, 40, 4, 4, 4, 4, 0, 0, 0, 0, 1, 1, 1, true, false},
      {"pixel rows 3x2 stride 3 dilated asym pads, 70 channels", 2, 5, 17, 19, 70, 3, 2, 3, 3, 1, 0, 2, 1, 2, 1, 1, false, true},
      {"pixel rows 5x5 stride 1, 96 channels, 3 samples", 3, 6, 13, 15, 96, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1, true, true},
      {"pixel rows 1x7, 64 channels, 17-wide", 2, 8, 5, 17, 64, 1, 7, 1, 1, 0, 3, 0, 3, 1, 1, 1, true, false},
      {"pixel rows 7x7 stride 2, 80x88 map in 256-pixel tiles", 1, 3, 80, 88, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, true},
      {"pixel rows 3x3 stride 2, 128 channels", 2, 9, 14, 14, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, true},
      // K = 270 = 2 x 128 + 14: two K blocks of 135 (gemm_panels.cc's gather_k_block), 1 and 2 threads
      {"pixel rows 3x3 stride 2, K 270 in two blocks", 1, 30, 30, 30, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, false},
      // a sample's output past 2 MiB: non-temporal stores in 16-pixel-aligned tiles (8464
      // pixels), and not where the map's planes break the lines (8281 pixels)
      {"pixel rows 7x7 stride 2, 2.2 MB output, streamed", 2, 3, 184, 184, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, true},
      {"pixel rows 7x7 stride 2, 2.1 MB output, 91x91 map", 1, 3, 182, 182, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, false},
      // 3x3 stride 1 on a map of fewer than 64 Winograd tiles with U >= 1 MiB: pixel rows, not
      // Winograd; 196 pixels in one tile, 7-row x 64-channel register tiles, K in blocks of 128
      {"pixel rows 3x3 stride 1, 14x14 map, 64 -> 256", 2, 64, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      // 7x7 map: 49 pixels in seven 7-row tiles; 96 channels: a pair of panels and an odd one
      {"pixel rows 3x3 stride 1, 7x7 map, 200 -> 96", 1, 200, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      // channels-in-lanes pointwise (maps up to 64 pixels, simd/pw_lanes.h): partial 32-channel
      // panels and 8-channel groups, partial 8-pixel tiles, fewer channels than one group
      {"pointwise lanes 5x7, 37 channels, 3 samples", 3, 11, 5, 7, 37, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise lanes 8x8 no bias, 48 channels (a 16-channel panel)", 2, 17, 8, 8, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false},
      {"pointwise lanes 1x3, 5 channels", 2, 3, 1, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
      // (28x28 64->40: the lanes would fill worse than the pixels', so this one takes sgemm_nn)
      {"pointwise 28x28 64->40 (sgemm_nn, not lanes)", 2, 64, 28, 28, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
      {"pointwise lanes 8x8 1100->16, two pixel chunks (56 + 8)", 1, 1100, 8, 8, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise lanes 7x7 320->1280 (efficientnet head)", 1, 320, 7, 7, 1280, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      // the first 8-pixel tile of a panel prefetches the next panel: odd panel counts, a map
      // with no whole tile (no prefetch), a batch of 8 (each sample prefetches its panels again)
      {"pointwise lanes 7x7 45->83, 8 samples (next-panel prefetch)", 8, 45, 7, 7, 83, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise lanes 2x3 33->70, no whole 8-pixel tile", 3, 33, 2, 3, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false},
      // more than 128 input channels: K in blocks (simd::pw_lanes' pixels_kblocked), the running
      // sums of at most 256 pixels kept between blocks (400 pixels: two passes), a last panel of
      // 16 channels, 7- and 1-pixel tail tiles; the 1100->16 and 320->1280 cases above too
      {"pointwise lanes 20x20 130->48, K in two blocks, two passes", 2, 130, 20, 20, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
      {"pointwise lanes 3x5 257->48, K in three blocks", 1, 257, 3, 5, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
  };
  Rng rng;
  for (const auto& c : cases) {
    const int64_t OH = (c.H + c.pt + c.pb - (c.dh * (c.kh - 1) + 1)) / c.sh + 1;
    const int64_t OW = (c.W + c.pl + c.pr - (c.dw * (c.kw - 1) + 1)) / c.sw + 1;
    V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), w = rng.vec(size_t(c.M * (c.C / c.g) * c.kh * c.kw)), b = rng.vec(size_t(c.M));
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int wi = pb.weight("w", {c.M, c.C / c.g, c.kh, c.kw}, w);
    int bi = c.bias ? pb.weight("b", {c.M}, b) : -1;
    int yi = pb.output("y", {c.M, OH, OW});
    pb.op("Conv", {xi, wi, bi}, {yi},
          {{"kernel", S{c.kh, c.kw}}, {"strides", S{c.sh, c.sw}}, {"pads", S{c.pt, c.pl, c.pb, c.pr}},
           {"dilations", S{c.dh, c.dw}}, {"group", c.g}, {"activation", std::string(c.relu ? "relu" : "none")}});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, c.n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.label) + ": " + r.message);
      // A float sum of K = C/g x kh x kw products of [-1, 1] values drifts from the double
      // reference about linearly in K: 1e-4 up to K = 1024, proportionally more past it (320
      // channels, K = 2880: 1.4e-4 on the AVX-512 flat path).
      const float tol = 1e-4f * std::max(1.f, float(c.C / c.g * c.kh * c.kw) / 1024.f);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], conv_ref(c, x, w, b, OH, OW), tol, c.label);
    }
  }
  // A plan whose output shape disagrees with the attrs is refused, not computed.
  PlanBuilder pb;
  int xi = pb.input("x", {1, 4, 4});
  int wi = pb.weight("w", {1, 1, 3, 3}, {});
  int yi = pb.output("y", {1, 4, 4});
  pb.op("Conv", {xi, wi}, {yi}, {{"kernel", S{3, 3}}});
  RunResult r = run_plan(pb, 1, {V(16)});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "output shape");
}

static void test_gemm_matmul() {
  Rng rng;
  // Small products, one row, and products the pool splits between two threads (the panels'
  // rows or columns; sgemm_pool without AVX-512); more than one 64-row block and K past the
  // panels' 256-step blocks (partial sums through C).
  struct GemmCase {
    int64_t n, K, N;
    int threads;
  };
  const GemmCase gcases[] = {{5, 7, 3, 1}, {1, 7, 3, 1}, {1, 1024, 2048, 2}, {3, 512, 2048, 2}, {12, 4100, 37, 1}, {9, 2500, 33, 2}, {150, 700, 70, 2}};
  for (const GemmCase& gc : gcases)
  for (bool transB : {false, true}) {
    const int64_t n = gc.n, K = gc.K, N = gc.N;
    V a = rng.vec(n * K), w = rng.vec(K * N), c = rng.vec(N);
    PlanBuilder pb;
    int ai = pb.input("a", {K});
    int wi = pb.weight("w", transB ? S{N, K} : S{K, N}, w);
    int ci = pb.weight("c", {N}, c);
    int yi = pb.output("y", {N});
    pb.op("Gemm", {ai, wi, ci}, {yi},
          {{"alpha", 0.5}, {"beta", 2.0}, {"transA", int64_t(0)}, {"transB", int64_t(transB)}, {"activation", std::string("relu")}});
    V ref(n * N);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[i * K + k] * (transB ? w[j * K + k] : w[k * N + j]);
        ref[i * N + j] = std::max(0.f, float(0.5 * s + 2.0 * c[j]));
      }
    RunResult r = run_plan(pb, n, {a}, gc.threads);
    CHECK_MSG(r.status == Status::kOk, r.message);
    const std::string label = std::string(transB ? "gemm transB" : "gemm") + " n=" + std::to_string(n) +
                              " K=" + std::to_string(K) + " N=" + std::to_string(N);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, K > 100 ? 1e-3f : 1e-5f, label);
  }
  {
    const int64_t n = 3, T = 2, K = 4, M = 5;
    V a = rng.vec(n * T * K), w = rng.vec(K * M);
    PlanBuilder pb;
    int ai = pb.input("a", {T, K});
    int wi = pb.weight("w", {K, M}, w);
    int yi = pb.output("y", {T, M});
    pb.op("MatMul", {ai, wi}, {yi});
    V ref(n * T * M);
    for (int64_t r = 0; r < n * T; ++r)
      for (int64_t j = 0; j < M; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[r * K + k] * w[k * M + j];
        ref[r * M + j] = float(s);
      }
    RunResult r = run_plan(pb, n, {a});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 1e-5f, "matmul");
  }
}

// Naive numpy broadcasting over the full shape (batch first) for the reference.
static V bcast_ref(char op, const V& a, S as, const V& b, S bs, S ys) {
  const size_t r = ys.size();
  while (as.size() < r) as.insert(as.begin(), 1);
  while (bs.size() < r) bs.insert(bs.begin(), 1);
  int64_t total = 1;
  for (auto d : ys) total *= d;
  V y(static_cast<size_t>(total));
  for (int64_t idx = 0; idx < total; ++idx) {
    int64_t rem = idx, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int i = int(r) - 1; i >= 0; --i) {
      int64_t q = rem % ys[i];
      rem /= ys[i];
      ia += (as[i] == 1 ? 0 : q) * sa;
      ib += (bs[i] == 1 ? 0 : q) * sb;
      sa *= as[i];
      sb *= bs[i];
    }
    float x = a[ia], z = b[ib];
    y[idx] = op == '+' ? x + z : op == '-' ? x - z : op == '*' ? x * z : x / z;
  }
  return y;
}

// Gemm on the packed panels (AVX-512; OpenBLAS elsewhere) at 1, 3 and 11 rows (one row tile,
// a partial one, more than one), transB or not: every form of C (a [N] weight, a scalar weight,
// an activation, none), alpha/beta, K not a multiple of the unrolled steps, N not a multiple
// of the 32-column panels, more panels than a group, with and without the folded Relu, panels
// split between threads.
static void test_gemm_variants() {
  Rng rng;
  enum CKind { kRowC, kScalarC, kActC, kNoC };
  struct Case {
    int64_t K, N;
    CKind c;
    bool relu;
    int threads;
  };
  const Case cases[] = {{37, 13, kScalarC, true, 1}, {37, 13, kActC, false, 1}, {38, 130, kNoC, true, 2},
                        {129, 130, kRowC, false, 2},  {5, 200, kActC, true, 2},   {64, 70, kScalarC, false, 2},
                        {300, 33, kRowC, true, 1},
                        // 18 panels, the last partial: a whole panel group and a part one
                        // (gemm_panels.cc's kPanelGroup), each through two K blocks at 11 rows
                        {300, 552, kRowC, true, 1},   {300, 552, kActC, false, 2}};
  for (const Case& gc : cases)
  for (int64_t n : {1, 3, 11})
  for (bool transB : {true, false}) {
    const int64_t K = gc.K, N = gc.N;
    V a = rng.vec(n * K), w = rng.vec(N * K), c = rng.vec(gc.c == kScalarC ? 1 : gc.c == kActC ? n * N : N);
    PlanBuilder pb;
    int ai = pb.input("a", {K});
    int ci = gc.c == kActC ? pb.input("c", {N}) : -1;
    int wi = pb.weight("w", transB ? S{N, K} : S{K, N}, w);
    if (gc.c == kRowC) ci = pb.weight("c", {N}, c);
    if (gc.c == kScalarC) ci = pb.weight("c", {1}, c);
    int yi = pb.output("y", {N});
    std::vector<int64_t> ins = {ai, wi};
    if (gc.c != kNoC) ins.push_back(ci);
    pb.op("Gemm", ins, {yi},
          {{"alpha", 0.5}, {"beta", 2.0}, {"transA", int64_t(0)}, {"transB", int64_t(transB)},
           {"activation", std::string(gc.relu ? "relu" : "none")}});
    V ref(n * N);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(a[i * K + k]) * (transB ? w[j * K + k] : w[k * N + j]);
        const double cj = gc.c == kNoC ? 0 : gc.c == kScalarC ? c[0] : gc.c == kActC ? c[i * N + j] : c[j];
        const float v = float(0.5 * s + 2.0 * cj);
        ref[i * N + j] = gc.relu ? std::max(0.f, v) : v;
      }
    RunResult r = gc.c == kActC ? run_plan(pb, n, {a, c}, gc.threads) : run_plan(pb, n, {a}, gc.threads);
    const std::string label = "gemm rows=" + std::to_string(n) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                              (transB ? " transB" : "") + " C kind " + std::to_string(int(gc.c)) +
                              (gc.relu ? " relu" : "") + " threads " + std::to_string(gc.threads);
    CHECK_MSG(r.status == Status::kOk, label + ": " + r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 1e-4f, label);
  }
}

static void test_binary() {
  Rng rng;
  struct Case { const char* op; char sym; S a; bool aw; S b; bool bw; S y; };
  const int64_t n = 3;
  const Case cases[] = {
      {"Add", '+', {4, 5}, false, {4, 5}, false, {4, 5}},
      {"Mul", '*', {4, 3, 3}, false, {4, 1, 1}, true, {4, 3, 3}},      // per-channel weight (folded BN)
      {"Sub", '-', {2, 3, 5}, false, {5}, true, {2, 3, 5}},            // suffix weight
      {"Div", '/', {4, 1, 5}, false, {1, 3, 1}, false, {4, 3, 5}},     // both activations broadcast
      {"Add", '+', {1}, true, {2, 6}, false, {2, 6}},                  // scalar weight first
      {"Sub", '-', {1, 2, 1}, true, {3, 2, 4}, false, {3, 2, 4}},      // weight with a leading 1
  };
  for (const auto& c : cases) {
    auto full = [&](const S& s, bool w) { S f = s; if (!w) f.insert(f.begin(), n); return f; };
    auto count = [](const S& s) { int64_t k = 1; for (auto d : s) k *= d; return size_t(k); };
    S af = full(c.a, c.aw), bf = full(c.b, c.bw), yf = c.y;
    yf.insert(yf.begin(), n);
    V a = rng.vec(count(af)), b = rng.vec(count(bf));
    for (auto& v : b) if (c.sym == '/') v = v >= 0 ? v + 0.5f : v - 0.5f;
    PlanBuilder pb;
    std::vector<std::vector<float>> ins;
    int ai = c.aw ? pb.weight("a", c.a, a) : (ins.push_back(a), pb.input("a", c.a));
    int bi = c.bw ? pb.weight("b", c.b, b) : (ins.push_back(b), pb.input("b", c.b));
    int yi = pb.output("y", c.y);
    pb.op(c.op, {ai, bi}, {yi});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, ins, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.op) + ": " + r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], bcast_ref(c.sym, a, af, b, bf, yf), 1e-6f, c.op);
    }
  }
}

static void test_unary() {
  Rng rng;
  const int64_t n = 2, E = 37;
  V x = rng.vec(n * E);
  for (auto& v : x) v *= 4.f;
  struct Case { const char* op; Attrs attrs; float (*f)(float); };
  const Case cases[] = {
      {"Relu", {}, [](float v) { return v > 0 ? v : 0.f; }},
      {"LeakyRelu", {{"alpha", 0.2}}, [](float v) { return v >= 0 ? v : 0.2f * v; }},
      {"Sigmoid", {}, [](float v) { return float(1.0 / (1.0 + std::exp(-double(v)))); }},
      {"Tanh", {}, [](float v) { return float(std::tanh(double(v))); }},
      {"Erf", {}, [](float v) { return float(std::erf(double(v))); }},
      {"Gelu", {}, [](float v) { return float(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))); }},
      {"Gelu", {{"approximate", std::string("tanh")}},
       [](float v) { return float(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))); }},
  };
  for (const auto& c : cases) {
    PlanBuilder pb;
    int xi = pb.input("x", {E});
    int yi = pb.output("y", {E});
    pb.op(c.op, {xi}, {yi}, c.attrs);
    V ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = c.f(x[i]);
    RunResult r = run_plan(pb, n, {x});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 2e-6f, c.op);
  }
}

static RunResult pool1(const char* op, Attrs attrs, S out, const V& x, S in = {1, 3, 3}) {
  PlanBuilder pb;
  int xi = pb.input("x", in);
  int yi = pb.output("y", out);
  pb.op(op, {xi}, {yi}, attrs);
  return run_plan(pb, 1, {x});
}

// Max pooling on random maps against the one-pass definition: bounds-checked windows, the
// first pass of max_separable's interior/edge split, ceil mode, dilation, asymmetric pads.
static void test_maxpool_random() {
  struct Case { const char* label; int64_t n, C, H, W, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw; bool ceil; };
  const Case cases[] = {
      {"maxpool 3x3/2 pad 1 (resnet stem)", 2, 3, 17, 23, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false},
      {"maxpool 3x3/2 ceil (squeezenet)", 1, 4, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true},
      // rows wide enough for simd::max3_stride2's 16-lane steps and a scalar tail
      {"maxpool 3x3/2 pad 1, 70 wide", 2, 3, 9, 70, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false},
      {"maxpool 3x3/2 ceil, 111 wide", 1, 2, 7, 111, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true},
      {"maxpool 3x2 s(1,3) dilated asym pads", 2, 2, 11, 19, 3, 2, 1, 3, 2, 1, 0, 1, 2, 1, false},
      {"maxpool 5x5/1 pad 2, wide", 1, 2, 9, 40, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, false},
      // 3-wide stride-2 windows take max_rows_first (AVX-512 or AVX2): squeezenet's 55- and 27-wide
      // ceil-mode rows (masked tails of 11 and 13 outputs, no full vector for 27), a window
      // of 5 dilated rows at row stride 3, a map wider than its windows reach (floor mode)
      {"maxpool 3x3/2 ceil, 55 wide (squeezenet)", 2, 3, 55, 55, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true},
      {"maxpool 3x3/2 ceil, 27 wide (squeezenet)", 1, 5, 27, 27, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true},
      {"maxpool 5x3 s(3,2) row dilation 2, asym pads", 2, 2, 17, 37, 5, 3, 3, 2, 2, 1, 3, 0, 2, 1, false},
      {"maxpool 3x3/2 floor, 36 wide (last column unread)", 1, 2, 9, 36, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, false},
      {"maxpool 3x3/2 pad 1 right only, 5 wide", 3, 2, 6, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, true},
  };
  Rng rng;
  for (const auto& c : cases) {
    auto out = [&](int64_t in, int64_t k, int64_t st, int64_t p0, int64_t p1, int64_t d) {
      const int64_t span = in + p0 + p1 - (d * (k - 1) + 1);
      int64_t o = (c.ceil ? (span + st - 1) / st : span / st) + 1;
      if (c.ceil && (o - 1) * st >= in + p0) --o;
      return o;
    };
    const int64_t OH = out(c.H, c.kh, c.sh, c.pt, c.pb, c.dh), OW = out(c.W, c.kw, c.sw, c.pl, c.pr, c.dw);
    V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), ref(size_t(c.n * c.C * OH * OW));
    for (int64_t p = 0; p < c.n * c.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float m = -FLT_MAX;
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              const int64_t ih = oh * c.sh - c.pt + i * c.dh, iw = ow * c.sw - c.pl + j * c.dw;
              if (ih >= 0 && ih < c.H && iw >= 0 && iw < c.W) m = std::max(m, x[size_t((p * c.H + ih) * c.W + iw)]);
            }
          ref[size_t((p * OH + oh) * OW + ow)] = m;
        }
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int yi = pb.output("y", {c.C, OH, OW});
    pb.op("MaxPool", {xi}, {yi},
          {{"kernel", S{c.kh, c.kw}}, {"strides", S{c.sh, c.sw}}, {"pads", S{c.pt, c.pl, c.pb, c.pr}},
           {"dilations", S{c.dh, c.dw}}, {"ceilMode", c.ceil}});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, c.n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.label) + ": " + r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, c.label);
    }
  }
}

// Average pooling on random maps against the definition (in double): avg_separable's
// interior/edge split on both axes, ceil-mode windows past the padded extent, asymmetric pads,
// strides on one axis only, and both counts (countIncludePad: the taps in the padded extent;
// without: the taps in the input). Inception's 3x3/1 pad-1 pools are the first case; ctest's
// ops_test_pool_no_flat runs the same-size ones on the row-by-row passes too.
static void test_avgpool_random() {
  struct Case { const char* label; int64_t n, C, H, W, kh, kw, sh, sw, pt, pl, pb, pr; bool ceil, include_pad; };
  const Case cases[] = {
      {"avgpool 3x3/1 pad 1 (inception), 35 wide", 2, 3, 35, 35, 3, 3, 1, 1, 1, 1, 1, 1, false, false},
      {"avgpool 3x3/1 pad 1, count pads", 1, 4, 17, 17, 3, 3, 1, 1, 1, 1, 1, 1, false, true},
      {"avgpool 3x3/2 ceil, 27 wide", 2, 2, 27, 27, 3, 3, 2, 2, 0, 0, 0, 0, true, false},
      {"avgpool 3x3/2 ceil pad 1, count pads (windows past the pad)", 1, 3, 10, 14, 3, 3, 2, 2, 1, 1, 1, 1, true, true},
      {"avgpool 5x3 s(1,2) asym pads", 2, 2, 13, 29, 5, 3, 1, 2, 2, 0, 1, 1, false, false},
      {"avgpool 2x5 s(2,1) asym pads, count pads", 1, 3, 9, 40, 2, 5, 2, 1, 0, 2, 1, 2, false, true},
      {"avgpool 7x7/1 no pad (a global-sized window)", 2, 2, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, false, false},
      {"avgpool 3x3/1 pad 1 on 2x3 (no interior)", 3, 2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, false, false},
      // same-size pools take the flat passes (avg_same_size): 8x8 planes, 5x5 windows, and
      // asymmetric pads (rows 0 above / 2 below, columns 2 left / 0 right)
      {"avgpool 3x3/1 pad 1 on 8x8, count pads", 2, 5, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, false, true},
      {"avgpool 5x5/1 pad 2 on 12x9", 1, 3, 12, 9, 5, 5, 1, 1, 2, 2, 2, 2, false, false},
      {"avgpool 3x3/1 pads 0,2 / 2,0, count pads", 2, 2, 6, 11, 3, 3, 1, 1, 0, 2, 2, 0, false, true},
  };
  Rng rng;
  for (const auto& c : cases) {
    auto out = [&](int64_t in, int64_t k, int64_t st, int64_t p0, int64_t p1) {
      const int64_t span = in + p0 + p1 - k;
      int64_t o = (c.ceil ? (span + st - 1) / st : span / st) + 1;
      if (c.ceil && (o - 1) * st >= in + p0) --o;
      return o;
    };
    const int64_t OH = out(c.H, c.kh, c.sh, c.pt, c.pb), OW = out(c.W, c.kw, c.sw, c.pl, c.pr);
    V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), ref(size_t(c.n * c.C * OH * OW));
    for (int64_t p = 0; p < c.n * c.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double sum = 0;
          int64_t inside = 0, padded = 0;
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              const int64_t ih = oh * c.sh - c.pt + i, iw = ow * c.sw - c.pl + j;
              if (ih < c.H + c.pb && iw < c.W + c.pr) ++padded;  // ONNX Runtime's count: the padded extent
              if (ih >= 0 && ih < c.H && iw >= 0 && iw < c.W) sum += x[size_t((p * c.H + ih) * c.W + iw)], ++inside;
            }
          const int64_t cnt = c.include_pad ? padded : inside;
          ref[size_t((p * OH + oh) * OW + ow)] = cnt > 0 ? float(sum / double(cnt)) : 0.f;
        }
    PlanBuilder pb;
    int xi = pb.input("x", {c.C, c.H, c.W});
    int yi = pb.output("y", {c.C, OH, OW});
    pb.op("AveragePool", {xi}, {yi},
          {{"kernel", S{c.kh, c.kw}}, {"strides", S{c.sh, c.sw}}, {"pads", S{c.pt, c.pl, c.pb, c.pr}},
           {"ceilMode", c.ceil}, {"countIncludePad", c.include_pad}});
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, c.n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, std::string(c.label) + ": " + r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 1e-5f, c.label);
    }
  }
}

// 2x2 stride-2 pools inside the map (pool2x2_stride2_plane): average and max on rows of 8-output
// steps with tails of 1-7 (OW 7, 15, 20; a floor-mode odd width leaves the last column unread),
// against the definitions in the generic loop's order: exactly the same floats.
static void test_pool2x2_random() {
  struct Case { int64_t n, C, H, W; };
  const Case cases[] = {{2, 3, 14, 14}, {1, 4, 9, 31}, {3, 2, 6, 40}, {1, 1, 2, 2}};
  Rng rng;
  for (const auto& c : cases)
    for (const char* op : {"AveragePool", "MaxPool"}) {
      const bool avg = std::string(op) == "AveragePool";
      const int64_t OH = c.H / 2, OW = c.W / 2;
      V x = rng.vec(size_t(c.n * c.C * c.H * c.W)), ref(size_t(c.n * c.C * OH * OW));
      for (int64_t p = 0; p < c.n * c.C; ++p)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const float* r0 = &x[size_t((p * c.H + 2 * oh) * c.W + 2 * ow)];
            const float* r1 = r0 + c.W;
            ref[size_t((p * OH + oh) * OW + ow)] = avg ? (((r0[0] + r0[1]) + r1[0]) + r1[1]) / 4.f
                                                       : std::max(std::max(r0[0], r0[1]), std::max(r1[0], r1[1]));
          }
      PlanBuilder pb;
      int xi = pb.input("x", {c.C, c.H, c.W});
      int yi = pb.output("y", {c.C, OH, OW});
      pb.op(op, {xi}, {yi}, {{"kernel", S{2, 2}}, {"strides", S{2, 2}}});
      const std::string label = std::string(op) + " 2x2/2 " + std::to_string(c.H) + "x" + std::to_string(c.W);
      for (int threads : {1, 2}) {
        RunResult r = run_plan(pb, c.n, {x}, threads);
        CHECK_MSG(r.status == Status::kOk, label + ": " + r.message);
        if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, label);
      }
    }
}

// Which kernel the AVX2 Winograd rule gives a 3x3 stride-1 conv (make_conv, conv.cc), where it
// applies (no AVX-512, AVX2+FMA): a 16 -> 16 conv on 16x16 takes it; a 320 -> 320 one (U 6.25
// MiB, over the 4 MiB cap) does not, so its correctness cases above would pass on either path;
// MEMLANE_CONV_NO_WINOGRAD keeps both off it.
static void test_winograd_avx2_rule() {
  if (memlane::cpu::use_avx512f() || !memlane::cpu::simd::have_avx2_gemm()) {
    std::printf("winograd avx2 rule: not checked (AVX-512 here, or no AVX2+FMA build)\n");
    return;
  }
  const auto plan = [](int64_t ch, int64_t side) {
    PlanBuilder pb;
    int x = pb.input("x", {ch, side, side});
    int w = pb.weight("w", {ch, ch, 3, 3}, std::vector<float>(size_t(ch * ch * 9), 0.01f));
    int y = pb.output("y", {ch, side, side});
    pb.op("Conv", {x, w, -1}, {y}, {{"kernel", S{3, 3}}, {"pads", S{1, 1, 1, 1}}});
    return pb;
  };
  const std::string small = conv_kernel_path(plan(16, 16), 0), capped = conv_kernel_path(plan(320, 7), 0);
  const bool off = std::getenv("MEMLANE_CONV_NO_WINOGRAD") != nullptr;
  CHECK_MSG((small == "winograd_avx2") != off, "16 -> 16 on 16x16 took " + small);
  CHECK_MSG(capped != "winograd_avx2" && capped.rfind("no kernel", 0) != 0, "320 -> 320 on 7x7 took " + capped);
}

static void test_pools() {
  test_maxpool_random();
  test_avgpool_random();
  test_pool2x2_random();
  Rng rng;
  const V x9 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Hand-computed: 3x3 input, kernel 2, stride 2, ceil mode -> 2x2 with partial windows.
  RunResult r = pool1("MaxPool", {{"kernel", S{2, 2}}, {"strides", S{2, 2}}, {"ceilMode", true}}, {1, 2, 2}, x9);
  CHECK_MSG(r.status == Status::kOk, r.message);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], (V{5, 6, 8, 9}), 0.f, "maxpool ceil");
  r = pool1("AveragePool", {{"kernel", S{2, 2}}, {"strides", S{2, 2}}, {"ceilMode", true}, {"countIncludePad", false}}, {1, 2, 2}, x9);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], (V{3, 4.5f, 7.5f, 9}), 1e-6f, "avgpool ceil");
  // Pads 1, kernel 3, stride 2: with countIncludePad the corner divides by 9, without by 4.
  r = pool1("AveragePool", {{"kernel", S{3, 3}}, {"strides", S{2, 2}}, {"pads", S{1, 1, 1, 1}}, {"countIncludePad", true}}, {1, 2, 2}, x9);
  CHECK_MSG(r.status == Status::kOk, r.message);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], (V{12.f / 9, 16.f / 9, 24.f / 9, 28.f / 9}), 1e-6f, "avgpool include pad");
  r = pool1("AveragePool", {{"kernel", S{3, 3}}, {"strides", S{2, 2}}, {"pads", S{1, 1, 1, 1}}, {"countIncludePad", false}}, {1, 2, 2}, x9);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], (V{3, 4, 6, 7}), 1e-6f, "avgpool exclude pad");
  // Dilated max pool: 4x4, kernel 2, dilation 2 -> 2x2 picks the corners of each 3x3 span.
  V x16(16);
  for (int i = 0; i < 16; ++i) x16[i] = float((i * 7) % 16);
  r = pool1("MaxPool", {{"kernel", S{2, 2}}, {"dilations", S{2, 2}}}, {1, 2, 2}, x16, {1, 4, 4});
  CHECK_MSG(r.status == Status::kOk, r.message);
  V ref(4);
  for (int oh = 0; oh < 2; ++oh)
    for (int ow = 0; ow < 2; ++ow) {
      float m = -FLT_MAX;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) m = std::max(m, x16[(oh + 2 * i) * 4 + ow + 2 * j]);
      ref[oh * 2 + ow] = m;
    }
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "maxpool dilated");
  // Ceil mode where the last window would start in the right pad: dropped (5x5, k2, s2, pad 1 -> 3).
  V x25(25);
  for (int i = 0; i < 25; ++i) x25[i] = float(i);
  r = pool1("MaxPool", {{"kernel", S{2, 2}}, {"strides", S{2, 2}}, {"pads", S{1, 1, 1, 1}}, {"ceilMode", true}}, {1, 3, 3}, x25, {1, 5, 5});
  CHECK_MSG(r.status == Status::kOk, r.message);
  if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], (V{0, 2, 4, 10, 12, 14, 20, 22, 24}), 0.f, "maxpool ceil pads");
  // GlobalAveragePool
  {
    PlanBuilder pb;
    int xi = pb.input("x", {2, 2, 2});
    int yi = pb.output("y", {2, 1, 1});
    pb.op("GlobalAveragePool", {xi}, {yi});
    RunResult g = run_plan(pb, 2, {V{1, 2, 3, 4, 0, 0, 0, 8, 1, 1, 1, 1, -4, 0, 0, 0}});
    CHECK_MSG(g.status == Status::kOk, g.message);
    if (g.status == Status::kOk) CHECK_CLOSE(g.outputs[0], (V{2.5f, 2, 1, -1}), 1e-6f, "global avg");
  }
  // GlobalAveragePool on SE-block-sized planes (simd::row_means on AVX-512): 64-float steps, 16-float
  // steps and a masked tail (49 = 3 x 16 + 1, 169 = 2 x 64 + 2 x 16 + 9, 196 = 3 x 64 + 4), a plane
  // shorter than a vector, whole vectors only, one pixel; odd channel counts, batch 3, 1 and 2 threads.
  for (int64_t side : {7, 13, 14, 2, 8, 1}) {
    const int64_t C = 37, n = 3, HW = side * side;
    PlanBuilder pb;
    int xi = pb.input("x", {C, side, side});
    int yi = pb.output("y", {C, 1, 1});
    pb.op("GlobalAveragePool", {xi}, {yi});
    V x = rng.vec(size_t(n * C * HW)), ref(size_t(n * C));
    for (int64_t p = 0; p < n * C; ++p) {
      double s = 0;
      for (int64_t i = 0; i < HW; ++i) s += x[size_t(p * HW + i)];
      ref[size_t(p)] = float(s / double(HW));
    }
    for (int threads : {1, 2}) {
      RunResult g = run_plan(pb, n, {x}, threads);
      const std::string label = "global avg " + std::to_string(side) + "x" + std::to_string(side) + " threads " +
                                std::to_string(threads);
      CHECK_MSG(g.status == Status::kOk, label + ": " + g.message);
      if (g.status == Status::kOk) CHECK_CLOSE(g.outputs[0], ref, 1e-5f, label);
    }
  }
}

static void test_shape_ops() {
  Rng rng;
  const int64_t n = 2;
  V x = rng.vec(n * 2 * 3 * 4);
  {  // Flatten then Reshape: plain copies
    PlanBuilder pb;
    int xi = pb.input("x", {2, 3, 4});
    int fi = pb.act("f", {24});
    int yi = pb.output("y", {6, 4});
    pb.op("Flatten", {xi}, {fi}, {{"axis", int64_t(1)}});
    pb.op("Reshape", {fi}, {yi}, {{"shape", S{-1, 6, 4}}});
    RunResult r = run_plan(pb, n, {x});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], x, 0.f, "flatten/reshape");
  }
  {  // Transpose [n,2,3,4] perm [0,2,3,1] -> [n,3,4,2]
    PlanBuilder pb;
    int xi = pb.input("x", {2, 3, 4});
    int yi = pb.output("y", {3, 4, 2});
    pb.op("Transpose", {xi}, {yi}, {{"perm", S{0, 2, 3, 1}}});
    V ref(x.size());
    for (int b = 0; b < n; ++b)
      for (int c = 0; c < 2; ++c)
        for (int h = 0; h < 3; ++h)
          for (int w = 0; w < 4; ++w) ref[((b * 3 + h) * 4 + w) * 2 + c] = x[((b * 2 + c) * 3 + h) * 4 + w];
    for (int threads : {1, 2}) {
      RunResult r = run_plan(pb, n, {x}, threads);
      CHECK_MSG(r.status == Status::kOk, r.message);
      if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "transpose");
    }
  }
  {  // Transposes whose axes merge (merge_transpose_axes): a channel shuffle, size-1 axes, an
     // identity, a swap of two merged pairs; against index arithmetic, 1 and 2 threads
    struct TCase { S dims; S perm; };  // per-sample dims; perm over [batch, dims...]
    const TCase tcases[] = {{{2, 3, 4, 5}, {0, 2, 1, 3, 4}}, {{3, 1, 4}, {0, 3, 2, 1}}, {{4, 5}, {0, 1, 2}},
                            {{2, 3, 4, 5}, {0, 3, 4, 1, 2}}, {{1, 6, 1}, {0, 3, 1, 2}}};
    for (const TCase& tc : tcases) {
      const int r = int(tc.dims.size()) + 1;
      S full{n};
      for (auto d : tc.dims) full.push_back(d);
      int64_t total = 1;
      for (auto d : full) total *= d;
      V tx = rng.vec(static_cast<size_t>(total)), ref(static_cast<size_t>(total));
      S st(static_cast<size_t>(r), 1), od(static_cast<size_t>(r)), ody;
      for (int k = r - 2; k >= 0; --k) st[size_t(k)] = st[size_t(k + 1)] * full[size_t(k + 1)];
      for (int k = 0; k < r; ++k) od[size_t(k)] = full[size_t(tc.perm[size_t(k)])];
      for (int k = 1; k < r; ++k) ody.push_back(od[size_t(k)]);
      for (int64_t f = 0; f < total; ++f) {
        int64_t rem = f, src = 0;
        for (int k = r - 1; k >= 0; --k) {
          src += (rem % od[size_t(k)]) * st[size_t(tc.perm[size_t(k)])];
          rem /= od[size_t(k)];
        }
        ref[size_t(f)] = tx[size_t(src)];
      }
      PlanBuilder pb;
      int xi = pb.input("x", tc.dims);
      int yi = pb.output("y", ody);
      pb.op("Transpose", {xi}, {yi}, {{"perm", tc.perm}});
      for (int threads : {1, 2}) {
        RunResult r2 = run_plan(pb, n, {tx}, threads);
        CHECK_MSG(r2.status == Status::kOk, r2.message);
        if (r2.status == Status::kOk) CHECK_CLOSE(r2.outputs[0], ref, 0.f, "transpose, merged axes");
      }
    }
  }
  for (int64_t axis : {1, 2}) {  // Concat [n,2,3] + [n,2,3] (axis 1 -> [n,4,3], axis 2 -> [n,2,6])
    V a = rng.vec(n * 6), b = rng.vec(n * 6);
    PlanBuilder pb;
    int ai = pb.input("a", {2, 3});
    int bi = pb.input("b", {2, 3});
    int yi = pb.output("y", axis == 1 ? S{4, 3} : S{2, 6});
    pb.op("Concat", {ai, bi}, {yi}, {{"axis", axis}});
    V ref;
    for (int s = 0; s < n; ++s) {
      if (axis == 1) {
        ref.insert(ref.end(), a.begin() + s * 6, a.begin() + s * 6 + 6);
        ref.insert(ref.end(), b.begin() + s * 6, b.begin() + s * 6 + 6);
      } else {
        for (int r = 0; r < 2; ++r) {
          ref.insert(ref.end(), a.begin() + s * 6 + r * 3, a.begin() + s * 6 + r * 3 + 3);
          ref.insert(ref.end(), b.begin() + s * 6 + r * 3, b.begin() + s * 6 + r * 3 + 3);
        }
      }
    }
    RunResult r = run_plan(pb, n, {a, b});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "concat");
  }
  for (const int64_t n : {int64_t(1), int64_t(3)}) {
    // Concats large enough for 2 threads to split the output (64 KiB a chunk at least; at batch
    // 1: a batch of 2+ runs in lanes, a sample a thread): the chunk boundaries fall inside
    // pieces and rows. Axis 1 of three maps of 5, 3 and 7 channels; axis 3 of two [16, 64, w]
    // (1 024 rows of 33 floats a sample).
    struct Cat { int64_t axis; std::vector<S> in; S out; };
    for (const Cat& cc : {Cat{1, {{5, 37, 41}, {3, 37, 41}, {7, 37, 41}}, {15, 37, 41}},
                          Cat{3, {{16, 64, 20}, {16, 64, 13}}, {16, 64, 33}}}) {
      PlanBuilder pb;
      std::vector<int64_t> ids;
      std::vector<V> xs;
      for (size_t k = 0; k < cc.in.size(); ++k) {
        ids.push_back(pb.input("x" + std::to_string(k), cc.in[k]));
        xs.push_back(rng.vec(n * cc.in[k][0] * cc.in[k][1] * cc.in[k][2]));
      }
      int yi = pb.output("y", cc.out);
      pb.op("Concat", ids, {yi}, {{"axis", cc.axis}});
      // rows: what comes before the axis (batch included); each input's row is the rest
      const int64_t rows = cc.axis == 1 ? n : n * cc.in[0][0] * cc.in[0][1];
      V ref;
      for (int64_t o = 0; o < rows; ++o)
        for (size_t k = 0; k < cc.in.size(); ++k) {
          const int64_t len = int64_t(xs[k].size()) / rows;
          ref.insert(ref.end(), xs[k].begin() + o * len, xs[k].begin() + (o + 1) * len);
        }
      for (int threads : {1, 2}) {
        RunResult r = run_plan(pb, n, xs, threads);
        CHECK_MSG(r.status == Status::kOk, r.message);
        if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, 0.f, "concat axis " + std::to_string(cc.axis) + ", split over " + std::to_string(threads) + " thread(s)");
      }
    }
  }
  for (int64_t k = 0; k < 4; ++k) {  // Softmax and LogSoftmax on [n,3,4] along axis 1 and 2
    const int64_t axis = 1 + k % 2;
    const bool log = k >= 2;
    PlanBuilder pb;
    int xi = pb.input("x", {3, 4});
    int yi = pb.output("y", {3, 4});
    pb.op(log ? "LogSoftmax" : "Softmax", {xi}, {yi}, {{"axis", axis}});
    V xs = rng.vec(n * 12);
    for (auto& v : xs) v *= 10.f;
    V ref(xs.size());
    for (int s = 0; s < n; ++s) {
      const int len = axis == 1 ? 3 : 4, outer = axis == 1 ? 4 : 3;
      for (int o = 0; o < outer; ++o) {
        auto at = [&](int j) { return axis == 1 ? s * 12 + j * 4 + o : s * 12 + o * 4 + j; };
        double m = -1e30, sum = 0;
        for (int j = 0; j < len; ++j) m = std::max(m, double(xs[at(j)]));
        for (int j = 0; j < len; ++j) sum += std::exp(xs[at(j)] - m);
        for (int j = 0; j < len; ++j)
          ref[at(j)] = float(log ? xs[at(j)] - m - std::log(sum) : std::exp(xs[at(j)] - m) / sum);
      }
    }
    RunResult r = run_plan(pb, n, {xs});
    CHECK_MSG(r.status == Status::kOk, r.message);
    if (r.status == Status::kOk) CHECK_CLOSE(r.outputs[0], ref, log ? 1e-5f : 1e-6f, log ? "log-softmax" : "softmax");
  }
}

int main() {
  check_depthwise_path();
  test_conv();
  test_winograd_avx2_rule();
  test_gemm_matmul();
  test_gemm_variants();
  test_binary();
  test_unary();
  test_pools();
  test_shape_ops();
  return finish("ops_test");
}
