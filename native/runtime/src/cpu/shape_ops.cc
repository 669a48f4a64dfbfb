// Flatten and Reshape (a copy unless the plan put input and output at the same offset),
// Transpose (batch stays first, its other axes merged where they stay neighbours;
// transpose_any.cc moves the batch) and Concat (any axis but the batch's).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"
#include "cpu/transpose_tiles.h"
#include "plan/concat_in_place.h"

namespace memlane::cpu {
namespace {

class CopyKernel final : public Kernel {
 public:
  TensorRef x, y;
  uint64_t bytes_per_sample = 0;  // any dtype: the layout is the same bytes
  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    if (X != Y) std::memmove(Y, X, bytes_per_sample * uint64_t(c.batch));
  }
};

constexpr int kMaxRank = 8;

class TransposeKernel final : public Kernel {
 public:
  TensorRef x, y;
  int rank = 0;                // full rank including the batch
  int64_t odims[kMaxRank]{};   // output dims (odims[0] = batch at run time)
  int64_t istride[kMaxRank]{}; // input stride of the input dim that feeds output dim i
  int64_t per_sample = 0;
  // The output axis (not the batch, not the last) that is the input's innermost one, when the
  // last is strided: the copy then runs as 2-D transposes of that axis against the last
  // (transpose_tiles.h) over the other axes. -1: none, row-by-row gathers.
  int tile_axis = -1;

  void run(const RunCtx& c) const override {
    const float* X = x.at(c);
    float* Y = y.at(c);
    const int r = rank;
    const int64_t L = odims[r - 1], sl = istride[r - 1];
    if (tile_axis > 0) return run_tiles(c, X, Y);
    int64_t outer = c.batch;
    for (int i = 1; i < r - 1; ++i) outer *= odims[i];
    // At least 64k elements a thread: the per-head transposes around attention (ViT: 12.6k
    // elements, a few microseconds) cost less than waking a pool worker.
    c.pool->parallel_for(outer, std::max<int64_t>(1, 65536 / std::max<int64_t>(L, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        int64_t rem = row, off = 0;
        for (int i = r - 2; i >= 1; --i) {
          off += (rem % odims[i]) * istride[i];
          rem /= odims[i];
        }
        off += rem * per_sample;  // the batch index
        float* yr = Y + row * L;
        const float* xr = X + off;
        if (sl == 1) std::memcpy(yr, xr, sizeof(float) * size_t(L));
        else
          for (int64_t j = 0; j < L; ++j) yr[j] = xr[j * sl];
      }
    });
  }

  // For every index of the other axes (the batch's included), one 2-D transpose: tile_axis
  // (A long; stride 1 in the input, ostride[q] in the output) against the last axis (L long;
  // stride sl in the input, 1 in the output).
  void run_tiles(const RunCtx& c, const float* X, float* Y) const {
    const int r = rank, q = tile_axis;
    const int64_t L = odims[r - 1], sl = istride[r - 1], A = odims[q];
    int64_t ostride[kMaxRank];  // the output's own strides (per sample; the batch's is per_sample)
    ostride[r - 1] = 1;
    for (int i = r - 2; i >= 1; --i) ostride[i] = ostride[i + 1] * odims[i + 1];
    int64_t outer = c.batch;
    for (int i = 1; i < r - 1; ++i)
      if (i != q) outer *= odims[i];
    c.pool->parallel_for(outer, std::max<int64_t>(1, 65536 / std::max<int64_t>(A * L, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        int64_t rem = o, in = 0, out = 0;
        for (int i = r - 2; i >= 1; --i) {
          if (i == q) continue;
          in += (rem % odims[i]) * istride[i];
          out += (rem % odims[i]) * ostride[i];
          rem /= odims[i];
        }
        in += rem * per_sample;
        out += rem * per_sample;
        transpose_tiles(X + in, sl, Y + out, ostride[q], A, L);
      }
    });
  }
};

class ConcatKernel final : public Kernel {
 public:
  std::vector<TensorRef> xs;
  std::vector<int64_t> inner;  // elements per outer row of each input
  size_t esize = 4;            // any dtype: rows are copied as bytes
  std::vector<bool> shared;    // a weight [1, ...]: the same rows for every sample
  // Written in its slice of the output already (plan/concat_in_place.h; the plan runs one
  // sample at a time): nothing to copy
  std::vector<bool> in_place;
  bool copies_nothing = false;  // every input in place
  TensorRef y;
  int64_t outer_per_sample = 1, out_inner = 0;
  bool batch_inner = false;  // the batch sits after the axis: it scales the rows, not their count
  // "in_place" where it copies nothing: the op profile shows which Concats the plan laid out so.
  const char* path() const override { return copies_nothing ? "in_place" : ""; }
  void run(const RunCtx& c) const override {
    if (copies_nothing) return;
    uint8_t* Y = y.as<uint8_t>(c);
    const int64_t outer = batch_inner ? outer_per_sample : outer_per_sample * c.batch;
    const int64_t scale = batch_inner ? c.batch : 1, row = out_inner * scale * int64_t(esize);
    // Each thread fills one contiguous range of the output, in 64-byte units, none woken for
    // less than 64 KiB: the copies are most of a concat-heavy CNN's memory traffic outside its
    // convs (squeezenet1_1's eight, 0.4 ms of 7.6 at batch 1; densenet121's 58), and one thread
    // alone left the other idle through them.
    const int64_t total = outer * row, units = (total + 63) / 64;
    c.pool->parallel_for(units, 1024, [&](int64_t u0, int64_t u1) {
      fill(c, Y, row, scale, u0 * 64, std::min(total, u1 * 64));
    });
  }

 private:
  // Output bytes [a, b): row by row, each row's pieces from the inputs in order.
  void fill(const RunCtx& c, uint8_t* Y, int64_t row, int64_t scale, int64_t a, int64_t b) const {
    for (int64_t o = a / row; o * row < b; ++o) {
      int64_t col = 0;  // bytes into the row
      for (size_t k = 0; k < xs.size(); ++k) {
        const int64_t n = inner[k] * scale * int64_t(esize);
        const int64_t lo = std::max(a, o * row + col), hi = std::min(b, o * row + col + n);
        if (lo < hi && !in_place[k]) {
          const int64_t src = shared[k] ? o % outer_per_sample : o;
          const uint8_t* X = xs[k].as<uint8_t>(c) + src * n + (lo - o * row - col);
          std::memcpy(Y + lo, X, size_t(hi - lo));
        }
        col += n;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_copy(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 2, st, msg)) return nullptr;  // Reshape may keep its (folded) shape input
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight()) return unsupported(op, "input must be an activation", st, msg);
  if (X.elements() != Y.elements() || X.dtype != Y.dtype)
    return unsupported(op, "input " + shape_str(X.shape) + " and output " + shape_str(Y.shape) +
                               " differ in elements per sample or dtype", st, msg);
  auto k = std::make_unique<CopyKernel>();
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->bytes_per_sample = X.bytes;
  return k;
}

std::unique_ptr<Kernel> make_transpose(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const auto& perm = op.attrs.perm;
  const int r = int(X.shape.size());
  // The batch moves, or is not first: transpose the whole request (transpose_any.cc).
  if (!X.batch_first() || perm.empty() || perm[0] != 0) return make_transpose_any(bc, op, st, msg);
  if (X.is_weight() || r < 2 || r > kMaxRank || int(perm.size()) != r || perm[0] != 0 || Y.shape.size() != X.shape.size())
    return unsupported(op, "needs perm of the input's rank with perm[0] = 0; X " + shape_str(X.shape), st, msg);
  // An element of 8 bytes (int64 ids: XLNet's, transposed time-major) moves as two float words:
  // one more axis of 2, last, that stays in place. The kernel only copies, bits unchanged.
  const int words = transpose_words(int64_t(dtype_size(X.dtype)));
  if (words == 0 || X.dtype != Y.dtype || r + (words > 1) > kMaxRank)
    return unsupported(op, std::string("transposes float32, int32 and int64 (") + (r + (words > 1) > kMaxRank ? "rank too high for int64" : "this dtype") + "); X " + shape_str(X.shape), st, msg);
  auto k = std::make_unique<TransposeKernel>();
  bool seen[kMaxRank] = {};
  int64_t sdims[kMaxRank];  // the per-sample axes (1 ..), and their perm from 0
  int sperm[kMaxRank];
  for (int i = 1; i < r; ++i) {
    if (perm[i] < 1 || perm[i] >= r || seen[perm[i]]) return unsupported(op, "perm is not a permutation", st, msg);
    seen[perm[i]] = true;
    if (Y.shape[i] != X.shape[perm[i]]) return unsupported(op, "output shape " + shape_str(Y.shape) + " does not match perm", st, msg);
    sdims[i - 1] = X.shape[i];
    sperm[i - 1] = perm[i] - 1;
  }
  int sr = r - 1;
  if (words > 1) {
    sdims[sr] = words;
    sperm[sr] = sr;
    ++sr;
  }
  // The per-sample axes merged (merge_transpose_axes): the batch stays its own axis in front.
  int m = 1;
  int64_t mdims[kMaxRank] = {1};
  int mperm[kMaxRank] = {0};
  merge_transpose_axes(sr, sdims, sperm, &m, mdims, mperm);
  int64_t mstride[kMaxRank];
  mstride[m - 1] = 1;
  for (int i = m - 2; i >= 0; --i) mstride[i] = mstride[i + 1] * mdims[i + 1];
  k->rank = m + 1;
  for (int i = 0; i < m; ++i) {
    k->odims[i + 1] = mdims[mperm[i]];
    k->istride[i + 1] = mstride[mperm[i]];
  }
  k->per_sample = X.elements() * words;
  // 8x8 tiles where both axes fill one (MEMLANE_TRANSPOSE_NO_TILES=1: the row gathers; A/B)
  if (k->istride[k->rank - 1] != 1 && k->odims[k->rank - 1] >= 8 && std::getenv("MEMLANE_TRANSPOSE_NO_TILES") == nullptr)
    for (int i = 1; i < k->rank - 1; ++i)
      if (k->istride[i] == 1 && k->odims[i] >= 8) k->tile_axis = i;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

std::unique_ptr<Kernel> make_concat(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (op.inputs.empty()) return unsupported(op, "needs inputs", st, msg);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const int axis = op.attrs.axis, r = int(Y.shape.size()), bax = Y.batch_axis();
  if (axis < 0 || axis >= r || axis == bax)
    return unsupported(op, "axis " + std::to_string(axis) + " out of range for " + shape_str(Y.shape) + " (or the batch axis)", st, msg);
  auto k = std::make_unique<ConcatKernel>();
  // Per-sample extents (a batch entry -k counts k); the batch scales the side it is on.
  const auto ext = [](int64_t d) { return d < 0 ? -d : d; };
  for (int i = 0; i < axis; ++i) k->outer_per_sample *= ext(Y.shape[i]);
  int64_t tail = 1;
  for (int i = axis + 1; i < r; ++i) tail *= ext(Y.shape[i]);
  k->batch_inner = bax > axis;
  int64_t total_axis = 0;
  for (int32_t id : op.inputs) {
    if (id == kAbsentInput) return unsupported(op, "absent input", st, msg);
    const TensorInfo& X = bc.info(id);
    if (X.dtype != Y.dtype) return unsupported(op, std::string("input dtype ") + dtype_name(X.dtype) + " differs from the output's " + dtype_name(Y.dtype), st, msg);
    // A weight takes part with a leading 1 (ViT's class token at a static batch of 1): every
    // sample gets the same rows.
    if (int(X.shape.size()) != r || (X.is_weight() && (X.shape[0] != 1 || bax != 0)))
      return unsupported(op, "inputs must be activations, or weights [1, ...] beside a batch-first output, of the output's rank; found " + shape_str(X.shape), st, msg);
    for (int i = 0; i < r; ++i)
      if (i != axis && X.shape[i] != Y.shape[i] && !(X.is_weight() && i == 0))
        return unsupported(op, "input " + shape_str(X.shape) + " does not fit " + shape_str(Y.shape), st, msg);
    k->xs.push_back(bc.ref(id));
    k->shared.push_back(X.is_weight());
    k->in_place.push_back(concat_input_in_place(*bc.plan, op, k->xs.size() - 1));
    k->inner.push_back(X.shape[axis] * tail);
    total_axis += X.shape[axis];
  }
  if (total_axis != Y.shape[axis]) return unsupported(op, "inputs do not add up to the output's axis", st, msg);
  k->out_inner = Y.shape[axis] * tail;
  k->copies_nothing = concat_copies_nothing(*bc.plan, op);
  k->esize = dtype_size(Y.dtype);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
