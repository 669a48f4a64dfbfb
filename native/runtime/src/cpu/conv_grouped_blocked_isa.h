// The vector-width half of the channel-blocked grouped conv (conv_grouped_blocked.h): a band's
// pack, compute and unpack, once for AVX-512 (16 lanes, conv_grouped_blocked_avx512.cc) and once
// for AVX2+FMA (8 lanes, conv_grouped_blocked_avx2.cc). conv_grouped_blocked.cc owns the rest,
// which does not depend on the width: the block layout, the weight packing, bands and threads.
#pragma once

#include <cstdint>

namespace memlane::cpu {

class GroupedBlockedConv;

struct GroupedIsa {
  const char* name;  // the kernel path a profile names (ConvKernel::path)
  int64_t lanes;     // floats a vector
  int64_t max_vecs;  // output-channel vectors one compute pass keeps in registers
  // in[r][q][slot] = padded x[channel of slot][oh0 * sh + r][q] for output rows [oh0, oh1):
  // zero outside the input and in the slots of groups past the vg that exist.
  void (*pack)(const GroupedBlockedConv& k, const float* xb, int64_t vg, int64_t oh0, int64_t oh1, float* in);
  // out[r][ow][vectors v0 .. v0 + nvc) for `rows` output rows (wp, bp and out come offset to
  // vector v0): bias, taps x Cg broadcast-FMAs, the folded activation, in registers.
  void (*compute)(const GroupedBlockedConv& k, int64_t nvc, const float* in, const float* wp, const float* bp,
                  int64_t rows, float* out);
  // y[oc of (vector, lane)][oh0 * OW + q] = out[q][vector][lane], for the lanes of the vg groups
  // that exist.
  void (*unpack)(const GroupedBlockedConv& k, const float* out, int64_t vg, int64_t oh0, int64_t oh1, float* yb);
};

// The kernels, or nullptr where this build or this CPU lacks the instructions
// (grouped_isa_avx512 also honours MEMLANE_CPU_NO_AVX512, through use_avx512f).
const GroupedIsa* grouped_isa_avx512();
const GroupedIsa* grouped_isa_avx2();

}  // namespace memlane::cpu
