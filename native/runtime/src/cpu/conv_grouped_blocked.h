// Channel-blocked grouped conv (RegNet's 8-24 channel groups, ResNeXt's 4-32, ShuffleNet's
// grouped 1x1s), with AVX-512's 16 lanes or AVX2's 8: output channels ride in the vector lanes,
// so a group's input channels x taps become broadcast-FMAs against weights prepacked at build,
// whatever the map's width (the direct kernel, group by group, vectorises 16 output columns of
// one channel: on 7- and 14-wide maps most of its lanes idle, and below 12 columns it does not
// apply at all).
//
// A block holds G whole groups (G = L / gcd(Mg, L) for L lanes; with 16: 1 for 16- and
// 32-channel groups, 2 for 8 and 24, 4 for 4 and 12, ...) and their G * Mg output channels in
// NV = G * Mg / L vectors. Lane l of vector k is group l % G, channel (Lk + l) / G of that
// group; the input is packed position-major with slot j * G + gi holding channel j of group gi,
// so one broadcast of G floats (a 1-, 2-, 4-, 8-float pattern, or a plain load for G = L) gives
// every lane its own group's input. Like the blocked depthwise kernel, band by band of output rows:
//   pack:    the block's G * Cg channel planes -> zero-bordered [rows][Wp][G * Cg],
//   compute: bias + taps x Cg broadcast-FMAs into [rows][OW][NV * L], the folded activation
//            (any kind) applied in registers,
//   unpack:  LxL transposes back to the channel planes.
// conv.cc takes it for every grouped conv with 2+ input channels a group: measured per op on
// AVX-512 against the direct kernel group by group (regnet_x/y_400mf, resnext50_32x4d, 1
// thread) it ran 0.37-0.97x the time, and within 3% (0.99-1.03x) on the rest: 28- and 56-wide
// maps with 4 or 8 channels a group (docs/native-cpu.md). On AVX2 (Zen 3) it replaced
// Winograd (stride 1) and im2col (stride 2) group by group: regnet_x_400mf's 22 grouped convs,
// summed per-op minima, 1 thread, pinned, alternating, 3 rounds: 5.8-5.9 ms -> 2.9-3.1 ms
// (ORT's NCHWc kernels: 3.6 ms). MEMLANE_CONV_NO_GROUPED=1 turns it off (ctest runs the
// grouped suites so too), MEMLANE_CONV_GROUPED_NO_AVX2=1 its AVX2 kernels only (A/B).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/conv_act.h"
#include "cpu/kernel.h"
#include "cpu/aligned_floats.h"

namespace memlane::cpu {

struct GroupedGeom {
  int64_t C, H, W, M, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw, group;
};

struct GroupedIsa;  // conv_grouped_blocked_isa.h: the kernels of one vector width

class GroupedBlockedConv {
 public:
  GroupedGeom g{};
  const GroupedIsa* isa = nullptr;
  int64_t lanes = 16;  // floats a vector: 16 (AVX-512) or 8 (AVX2)
  int64_t Cg = 0, Mg = 0, G = 1, NV = 1, blocks = 0, K = 0, CB = 0, Wp = 0, band = 1, band_in_rows = 0;
  AlignedFloats wpack;  // [block][tap][Cg][NV][lanes], zero in padded groups
  AlignedFloats bpack;  // [block][NV][lanes]
  std::vector<int32_t> lane_oc;    // [NV * lanes]: output channel of (vector, lane) from the block's first
  std::vector<int32_t> slot_ch;    // [CB]: input channel of a packed slot from the block's first
  std::vector<int64_t> tap_off;    // floats from an output's first tap to tap t in the band
  ConvAct act;
  int threads = 1;

  int64_t in_rows(int64_t b) const { return (b - 1) * g.sh + (g.kh - 1) * g.dh + 1; }
  // The width-free part of a band's packing (the kernels' pack, conv_grouped_blocked_isa.h):
  // zeroes the rows of the band `in` for output rows [oh0, oh1) that lie outside the input and
  // every other row's left and right pads; the input's rows h0..h1 go to `first` on.
  struct BandRows {
    int64_t h0, h1;
    float* first;  // slot 0 of input row h0's first position
  };
  BandRows zero_band_borders(int64_t oh0, int64_t oh1, float* in) const;
  int64_t slot_floats() const { return band_in_rows * Wp * CB + band * g.OW * NV * lanes; }
  uint64_t workspace_floats() const { return uint64_t(threads) * uint64_t(slot_floats()); }
  // X: [batch][C][H][W] (may be a copy of the plan's input), Y: [batch][M][OH][OW].
  void run(const RunCtx& c, const float* X, float* Y) const;
};

// The kernel, or nullptr where it does not apply: neither AVX-512 (or MEMLANE_CPU_NO_AVX512)
// nor an AVX2+FMA build (or MEMLANE_CONV_GROUPED_NO_AVX2), MEMLANE_CONV_NO_GROUPED set, or
// group == 1. Blocks wider than the registers hold run in
// passes of at most 4 vectors (run_block), so no width is refused.
std::shared_ptr<const GroupedBlockedConv> make_grouped_blocked(const GroupedGeom& g, const float* w,
                                                              const float* bias, const ConvAct& act, int threads);

// Whether a depthwise conv (one channel a group) takes this kernel, with AVX2's 8 channels in
// the lanes, rather than conv_depthwise.h's pixels-in-lanes kernel: on CPUs without AVX-512
// (which have their own channel-blocked depthwise kernel), for strided convs to small output
// maps, where a channel's plane copy and its rows of one or two vectors cost more than the
// transposes in and out. Off with MEMLANE_DW_PER_CHANNEL, MEMLANE_DW_NO_AVX2 (the depthwise
// suites' switches), MEMLANE_CONV_GROUPED_NO_AVX2 or MEMLANE_CONV_NO_GROUPED.
bool grouped_blocked_takes_depthwise(int64_t OH, int64_t OW, int64_t sh, int64_t sw);

}  // namespace memlane::cpu
