// A Conv's fused activation (the backend folds a Conv -> Relu / Clip / HardSwish / SiLU pair
// into the Conv when the intermediate tensor has no other reader). Applied in place on
// output rows while they are still in cache; the formulas are the standalone ops' own
// (clip_hard.cc, vmath.h), so a fused model computes the same floats as an unfused one.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/cnn_ops.h"
#include "cpu/vmath.h"
#include "plan/plan.h"

namespace memlane::cpu {

struct ConvAct {
  enum Kind : uint8_t { kNone, kRelu, kClip, kHardSwish, kSiLU };
  Kind kind = kNone;
  float lo = 0.f, hi = 0.f;  // kClip bounds
};

// The ConvAct a standalone activation op computes (Relu, Clip, HardSwish, SiLU), for folding
// it into the conv before it; false for any other op, and for a Clip whose bounds are
// inverted (its own kernel refuses it, naming it).
inline bool conv_act_of(const Op& a, ConvAct* act) {
  switch (a.type) {
    case OpType::kRelu: *act = {ConvAct::kRelu, 0.f, 0.f}; return true;
    case OpType::kClip:
      if (!(a.attrs.clipMin <= a.attrs.clipMax)) return false;
      *act = {ConvAct::kClip, a.attrs.clipMin, a.attrs.clipMax};
      return true;
    case OpType::kHardSwish: *act = {ConvAct::kHardSwish, 0.f, 0.f}; return true;
    case OpType::kSiLU: *act = {ConvAct::kSiLU, 0.f, 0.f}; return true;
    default: return false;
  }
}

// y = act(y) over n floats.
inline void conv_activate(float* y, int64_t n, const ConvAct& a) {
  switch (a.kind) {
    case ConvAct::kNone: return;
    case ConvAct::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
      return;
    case ConvAct::kClip: clip(y, y, n, a.lo, a.hi); return;  // elementwise: in place is safe
    case ConvAct::kHardSwish: hard_swish(y, y, n); return;   // likewise
    case ConvAct::kSiLU: {
      // silu() writes sigmoid(x) to y before multiplying by x: in place it needs x kept aside.
      float s[256];
      for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t m = std::min<int64_t>(256, n - i0);
        vmath::sigmoid(y + i0, s, m);
        for (int64_t i = 0; i < m; ++i) y[i0 + i] *= s[i];
      }
      return;
    }
  }
}

}  // namespace memlane::cpu
