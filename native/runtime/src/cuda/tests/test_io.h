// Request buffers for the CUDA-vs-CPU comparison in every plan dtype: inputs generated per
// dtype (floats in [-1, 1), integers in [lo, hi], bools 0/1); float outputs compared within a
// tolerance, integer and bool outputs exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "plan/plan.h"

namespace cudatest {

struct Io {
  std::vector<std::vector<uint64_t>> in, out;  // 8-byte aligned bytes of each tensor
  std::vector<const float*> inp;
  std::vector<float*> outp;
};

inline uint64_t next_random(uint64_t* s) {
  *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
  return *s;
}

inline Io make_io(const memlane::Plan& p, int64_t batch, uint64_t seed, int64_t lo, int64_t hi) {
  using memlane::DType;
  Io io;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const memlane::TensorInfo& t = p.tensors[p.inputs[i]];
    const size_t n = size_t(batch * t.elements());
    std::vector<uint64_t> buf((n * memlane::dtype_size(t.dtype) + 7) / 8);
    uint64_t s = (seed + i) * 0x9e3779b97f4a7c15ULL + 7;
    for (size_t k = 0; k < n; ++k) {
      const uint64_t r = next_random(&s);
      const int64_t v = lo + int64_t((r >> 20) % uint64_t(hi - lo + 1));
      switch (t.dtype) {
        case DType::kFloat32: reinterpret_cast<float*>(buf.data())[k] = float((r >> 40) & 0xffffff) / float(1 << 23) - 1.f; break;
        case DType::kInt64: reinterpret_cast<int64_t*>(buf.data())[k] = v; break;
        case DType::kInt32: reinterpret_cast<int32_t*>(buf.data())[k] = int32_t(v); break;
        case DType::kBool: reinterpret_cast<uint8_t*>(buf.data())[k] = uint8_t((r >> 33) & 1); break;
      }
    }
    io.in.push_back(std::move(buf));
  }
  for (int32_t id : p.outputs) {  // a pattern no backend writes by chance
    const size_t bytes = size_t(batch * p.tensors[id].elements()) * memlane::dtype_size(p.tensors[id].dtype);
    io.out.emplace_back((bytes + 7) / 8, 0xa5a5a5a5a5a5a5a5ULL);
  }
  for (auto& v : io.in) io.inp.push_back(reinterpret_cast<const float*>(v.data()));
  for (auto& v : io.out) io.outp.push_back(reinterpret_cast<float*>(v.data()));
  return io;
}

// An integer or bool element as an integer (exact for every int64).
inline int64_t int_element(const std::vector<uint64_t>& buf, memlane::DType t, size_t k) {
  using memlane::DType;
  switch (t) {
    case DType::kInt64: return reinterpret_cast<const int64_t*>(buf.data())[k];
    case DType::kInt32: return reinterpret_cast<const int32_t*>(buf.data())[k];
    default: return reinterpret_cast<const uint8_t*>(buf.data())[k];
  }
}

inline constexpr double kMismatch = 1e30;  // worse than any tolerance

// Worst over the outputs of max |got - ref| / max(1, max |ref|); NaN counts as 1e30.
// Integer and bool outputs must match exactly (an index or a count off by one is wrong at
// any tolerance, and the relative scale would hide it behind a large |ref|): any
// difference counts as 1e30.
inline double rel_diff(const memlane::Plan& p, int64_t batch, const Io& got, const Io& ref) {
  double worst = 0;
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const memlane::TensorInfo& t = p.tensors[p.outputs[o]];
    const size_t n = size_t(batch * t.elements());
    if (t.dtype != memlane::DType::kFloat32) {
      for (size_t k = 0; k < n; ++k)
        if (int_element(got.out[o], t.dtype, k) != int_element(ref.out[o], t.dtype, k)) return kMismatch;
      continue;
    }
    double m = 1, d = 0;
    for (size_t k = 0; k < n; ++k) {
      const double r = reinterpret_cast<const float*>(ref.out[o].data())[k];
      const double g = reinterpret_cast<const float*>(got.out[o].data())[k];
      m = std::max(m, std::fabs(r));
      const double e = std::fabs(g - r);
      if (std::isnan(e)) return kMismatch;  // not scaled down by a large |ref|
      d = std::max(d, e);
    }
    worst = std::max(worst, d / m);
  }
  return worst;
}

}  // namespace cudatest
