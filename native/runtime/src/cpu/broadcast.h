// numpy broadcasting over plan v2 shapes (a dim -k is k x batch, at any axis), resolved for a
// batch at run time: output dims that are 1 are dropped and adjacent dims merged where every
// input stays contiguous or broadcast in both, so the inner loop is as long as possible.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "cpu/kernel.h"

namespace memlane::cpu {

inline constexpr int kMaxBroadcastRank = 8;
inline constexpr int kMaxBroadcastInputs = 3;

struct BroadcastLoop {
  int rank = 0;  // merged rank (0: one element)
  int64_t d[kMaxBroadcastRank] = {};
  int64_t s[kMaxBroadcastInputs][kMaxBroadcastRank] = {};  // element strides, 0 = broadcast
  int64_t rows() const {
    int64_t r = 1;
    for (int i = 0; i + 1 < rank; ++i) r *= d[i];
    return r;
  }
  int64_t len() const { return rank ? d[rank - 1] : 1; }
  // Element offset of each input at the start of merged row `row`.
  void offsets(int64_t row, int n, int64_t* off) const {
    for (int j = 0; j < n; ++j) off[j] = 0;
    for (int i = rank - 2; i >= 0; --i) {
      const int64_t q = row % d[i];
      row /= d[i];
      for (int j = 0; j < n; ++j) off[j] += q * s[j][i];
    }
  }
};

class Broadcast {
 public:
  // Inputs right-aligned to the output's rank; each dim equals the output's or is 1.
  bool init(const TensorInfo& y, const std::vector<const TensorInfo*>& xs, std::string* why) {
    rank_ = int(y.shape.size());
    n_ = int(xs.size());
    if (rank_ > kMaxBroadcastRank || n_ > kMaxBroadcastInputs) {
      *why = "rank above 8 in " + shape_str(y.shape);
      return false;
    }
    for (int i = 0; i < rank_; ++i) out_[i] = y.shape[size_t(i)];
    for (int j = 0; j < n_; ++j) {
      const auto& sh = xs[size_t(j)]->shape;
      const int r = int(sh.size());
      if (r > rank_) {
        *why = "input " + shape_str(sh) + " has a higher rank than the output " + shape_str(y.shape);
        return false;
      }
      for (int i = 0; i < rank_; ++i) {
        const int ti = i - (rank_ - r);
        in_[j][i] = ti < 0 ? 1 : sh[size_t(ti)];
        if (in_[j][i] != out_[i] && in_[j][i] != 1) {
          *why = "input " + shape_str(sh) + " does not broadcast to " + shape_str(y.shape);
          return false;
        }
      }
    }
    return true;
  }

  BroadcastLoop resolve(int64_t batch) const {
    auto res = [batch](int64_t v) { return v < 0 ? -v * batch : v; };
    int64_t stride[kMaxBroadcastInputs][kMaxBroadcastRank];
    for (int j = 0; j < n_; ++j) {
      int64_t acc = 1;
      for (int i = rank_ - 1; i >= 0; --i) {
        const int64_t di = res(in_[j][i]);
        stride[j][i] = di == 1 ? 0 : acc;
        acc *= di;
      }
    }
    BroadcastLoop L;
    int k = 0;
    for (int i = 0; i < rank_; ++i) {
      const int64_t di = res(out_[i]);
      if (di == 1) continue;
      if (k > 0) {
        bool merge = true;
        for (int j = 0; j < n_ && merge; ++j) {
          const int64_t p = L.s[j][k - 1], q = stride[j][i];
          merge = (p == 0 && q == 0) || (q != 0 && p == q * di);
        }
        if (merge) {
          L.d[k - 1] *= di;
          for (int j = 0; j < n_; ++j) L.s[j][k - 1] = stride[j][i];
          continue;
        }
      }
      L.d[k] = di;
      for (int j = 0; j < n_; ++j) L.s[j][k] = stride[j][i];
      ++k;
    }
    L.rank = k;
    return L;
  }

 private:
  int rank_ = 0, n_ = 0;
  int64_t out_[kMaxBroadcastRank] = {};
  int64_t in_[kMaxBroadcastInputs][kMaxBroadcastRank] = {};
};

// Runs body(row, offsets, len) over the merged rows of L, split across the pool.
template <typename Body>
void for_each_row(const RunCtx& c, const BroadcastLoop& L, int n, Body body) {
  const int64_t len = L.len();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1));
  c.pool->parallel_for(L.rows(), grain, [&](int64_t r0, int64_t r1) {
    int64_t off[kMaxBroadcastInputs];
    for (int64_t r = r0; r < r1; ++r) {
      L.offsets(r, n, off);
      body(r, off, len);
    }
  });
}

}  // namespace memlane::cpu
