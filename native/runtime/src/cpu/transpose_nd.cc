// Transpose of any permutation over rank <= 6, the batch an ordinary dimension: plan v1's
// TransposeKernel (shape_ops.cc) keeps the batch first; this one also moves it (ViT's and
// torch LSTM's [1, 0, 2]) once a plan can place the batch on another axis.
#include <cstring>

#include "cpu/cnn_ops.h"

namespace memlane::cpu {

void merge_transpose_axes(int rank, const int64_t* dims, const int* perm, int* rank_out, int64_t* mdims, int* mperm) {
  static_assert(kTransposeMaxRank * 2 >= 8, "plan v1's TransposeKernel merges up to 7 per-sample axes");
  // Output positions whose input axis has more than one element, in output order.
  int keep[kTransposeMaxRank * 2], n = 0;
  for (int k = 0; k < rank; ++k)
    if (dims[perm[k]] != 1) keep[n++] = perm[k];
  if (n == 0) {
    *rank_out = 1;
    mdims[0] = 1;
    mperm[0] = 0;
    return;
  }
  // Runs of consecutive input axes (a, a+1, ... once the size-1 axes are gone) in output order.
  int first[kTransposeMaxRank * 2], groups = 0;
  int64_t size[kTransposeMaxRank * 2];
  const auto next_kept = [&](int a) {  // the next input axis after a with more than one element
    for (int b = a + 1; b < rank; ++b)
      if (dims[b] != 1) return b;
    return -1;
  };
  for (int i = 0; i < n; ++i) {
    if (i > 0 && keep[i] == next_kept(keep[i - 1])) {
      size[groups - 1] *= dims[keep[i]];
      continue;
    }
    first[groups] = keep[i];
    size[groups++] = dims[keep[i]];
  }
  // A group's input index: how many groups start at a lower input axis.
  for (int gi = 0; gi < groups; ++gi) {
    int idx = 0;
    for (int gj = 0; gj < groups; ++gj) idx += first[gj] < first[gi];
    mperm[gi] = idx;
    mdims[idx] = size[gi];
  }
  *rank_out = groups;
}

void transpose_nd(const float* x, float* y, int rank0, const int64_t* dims0, const int* perm0) {
  int64_t in_stride[kTransposeMaxRank] = {}, odims[kTransposeMaxRank] = {}, ostride[kTransposeMaxRank] = {};
  if (rank0 < 1 || rank0 > kTransposeMaxRank) return;
  int rank;
  int64_t dims[kTransposeMaxRank];
  int perm[kTransposeMaxRank];
  merge_transpose_axes(rank0, dims0, perm0, &rank, dims, perm);
  in_stride[rank - 1] = 1;
  for (int k = rank - 2; k >= 0; --k) in_stride[k] = in_stride[k + 1] * dims[k + 1];
  int64_t rows = 1;
  for (int k = 0; k < rank; ++k) {
    odims[k] = dims[perm[k]];
    ostride[k] = in_stride[perm[k]];  // input stride of output dimension k
    if (k < rank - 1) rows *= odims[k];
  }
  const int64_t L = odims[rank - 1], sl = ostride[rank - 1];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, off = 0;
    for (int k = rank - 2; k >= 0; --k) {
      off += (rem % odims[k]) * ostride[k];
      rem /= odims[k];
    }
    float* yr = y + row * L;
    const float* xr = x + off;
    if (sl == 1) std::memcpy(yr, xr, sizeof(float) * size_t(L));
    else
      for (int64_t j = 0; j < L; ++j) yr[j] = xr[j * sl];
  }
}

}  // namespace memlane::cpu
