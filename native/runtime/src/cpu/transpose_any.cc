// Transpose where the batch moves or is not the first axis (torch's seq-first [S, B, E] <->
// [B, S, E], and head splits on [S, B·H, hd]): the permutation runs over the dims resolved
// for the request's batch, so it needs no per-sample layout (shape_ops.cc's kernel does).
#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"

namespace memlane::cpu {
namespace {

class TransposeAnyKernel final : public Kernel {
 public:
  TensorRef x, y;
  TensorInfo in;  // the input's plan shape (-k at the batch axis)
  int perm[kTransposeMaxRank]{};
  int words = 1;  // float words an element: 2 for int64, an axis of its own that stays last
  void run(const RunCtx& c) const override {
    std::vector<int64_t> dims = in.resolved(c.batch);
    if (words > 1) dims.push_back(words);
    transpose_nd(x.at(c), y.at(c), int(dims.size()), dims.data(), perm);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_transpose_any(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const auto& perm = op.attrs.perm;
  const int r = int(X.shape.size());
  const int words = transpose_words(int64_t(dtype_size(X.dtype)));
  if (X.is_weight() || words == 0 || X.dtype != Y.dtype || r < 1 || r + (words > 1) > kTransposeMaxRank ||
      int(perm.size()) != r || Y.shape.size() != X.shape.size())
    return unsupported(op, "moving the batch needs a float32, int32 or int64 activation of rank <= " +
                               std::to_string(kTransposeMaxRank - 1) + " (" + std::to_string(kTransposeMaxRank) +
                               " for 4-byte elements) and a perm of its rank; X " + shape_str(X.shape),
                       st, msg);
  auto k = std::make_unique<TransposeAnyKernel>();
  bool seen[kTransposeMaxRank] = {};
  for (int i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]) return unsupported(op, "perm is not a permutation", st, msg);
    seen[perm[i]] = true;
    if (Y.shape[i] != X.shape[perm[i]])
      return unsupported(op, "output shape " + shape_str(Y.shape) + " does not match perm of " + shape_str(X.shape), st, msg);
    k->perm[i] = perm[i];
  }
  if (words > 1) k->perm[r] = r;  // the element's two words stay together, last
  k->words = words;
  k->in.shape = X.shape;
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
