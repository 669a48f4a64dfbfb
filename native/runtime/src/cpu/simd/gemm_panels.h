// A dense layer's weights packed at load into 32-column panels, and the product of any number
// of rows of activations with them (Gemm and MatMul with a weight B: transformers' projections
// and feed-forward layers, classifiers).
//
// B as the plan stores it is [K][N] (MatMul, Gemm) or [N][K] (Gemm transB): a 32-column panel
// of [K][N] is K rows of 128 bytes N floats apart, a new page every few rows where N is in the
// thousands; [N][K] needs a dot product a column and a horizontal sum an output. Packed, each
// panel is K x 32 floats in one run ([panel][K][32], zero columns past N), read front to back:
// the register tile (8 rows x 32 columns, A broadcast) streams it, K in blocks whose A rows
// stay in L2 and whose panel block stays in L1 across the row tiles. ONNX Runtime's MLAS packs
// its B the same way at session creation. Needs have_avx512().
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "cpu/aligned_floats.h"

namespace memlane::cpu::simd {

inline constexpr int64_t kPanelCols = 32;

struct PackedPanels {
  AlignedFloats w;  // [panels][K][32], each panel row on a cache line
  int64_t K = 0, N = 0;
  int64_t panels() const { return (N + kPanelCols - 1) / kPanelCols; }
};

// B [K][N] (transB false) or [N][K] (transB true), row-major.
PackedPanels pack_panels(const float* B, int64_t K, int64_t N, bool transB);

// Packed weights by the plan weight they come from: a plan of several shape profiles builds one
// CPU backend a profile, and each packing the same weights would hold a copy a profile (a BERT
// plan compiled for three sequence lengths: three copies of every dense layer, where reading
// the mapping in place held none). The Runtime's profiles share one cache (SharedHostBuffers).
class PanelCache {
 public:
  std::shared_ptr<const PackedPanels> get(const float* B, int64_t K, int64_t N, bool transB) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& p = packs_[{B, K, N, transB}];
    if (!p) p = std::make_shared<const PackedPanels>(pack_panels(B, K, N, transB));
    return p;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return packs_.size();
  }
  // Frees the packs no kernel holds any more (the conv tuner's losing candidates made them).
  void drop_unused() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = packs_.begin(); it != packs_.end();) it = it->second.use_count() == 1 ? packs_.erase(it) : std::next(it);
  }

 private:
  std::mutex mu_;
  std::map<std::tuple<const float*, int64_t, int64_t, bool>, std::shared_ptr<const PackedPanels>> packs_;
};

// B's packed panels from the Runtime's cache where the kernel has one (BuildCtx::panels), else a
// copy of the kernel's own.
inline std::shared_ptr<const PackedPanels> shared_panels(PanelCache* cache, const float* B, int64_t K, int64_t N,
                                                         bool transB) {
  return cache ? cache->get(B, K, N, transB) : std::make_shared<const PackedPanels>(pack_panels(B, K, N, transB));
}

// What a tile does before its store: C = alpha * (A x B) + bias[j] (bias may be null), then
// Relu where asked.
struct PanelEpilogue {
  float alpha = 1.f;
  const float* bias = nullptr;  // [N]
  bool relu = false;
};

// C[r][j] for rows r < M and the columns of panels [p0, p1): A [M][K] with leading dim lda, C
// with leading dim ldc (only columns below N are written).
void gemm_panels(int64_t M, int64_t p0, int64_t p1, const float* A, int64_t lda, const PackedPanels& B, float* C,
                 int64_t ldc, const PanelEpilogue& e);

// The same product on an implicit A: element (r, k) is rows[r][cols[k]], K = B.K, panels
// [p0, p1). A convolution's im2col without the copy (conv_pixel_rows.cc): rows[r] points at
// output pixel r's receptive-field origin in a zero-bordered input, cols[k] is tap k's offset.
// Two panels at a time in register tiles of up to 7 rows x 64 columns, all M rows at each block
// of K, so B is read once a call: the caller bounds M (its C, M x ldc floats, stays in L2).
void gemm_panels_gather(int64_t M, int64_t p0, int64_t p1, const float* const* rows, const int32_t* cols,
                        const PackedPanels& B, float* C, int64_t ldc, const PanelEpilogue& e);

}  // namespace memlane::cpu::simd
