// Transpose of any permutation over rank <= 6, the batch an ordinary dimension: plan v1's
// TransposeKernel (shape_ops.cc) keeps the batch first; this one also moves it (ViT's and
// torch LSTM's [1, 0, 2]) once a plan can place the batch on another axis.
#include "cpu/cnn_ops.h"

namespace memlane::cpu {

void transpose_nd(const float* x, float* y, int rank, const int64_t* dims, const int* perm) {
  int64_t in_stride[kTransposeMaxRank] = {}, odims[kTransposeMaxRank] = {}, ostride[kTransposeMaxRank] = {};
  if (rank < 1 || rank > kTransposeMaxRank) return;
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
    for (int64_t j = 0; j < L; ++j) yr[j] = xr[j * sl];
  }
}

}  // namespace memlane::cpu
