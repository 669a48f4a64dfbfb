// One compiled op of the CPU backend: everything that depends only on the plan (shapes,
// strides, output sizes, weight pointers) is resolved once in its factory; run() only
// computes. Activations live at arena + batch * offset (docs/plan-format.md, batch scaling).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/conv_act.h"
#include "cpu/thread_pool.h"
#include "plan/plan.h"
#include "status.h"

namespace memlane::cpu {

namespace simd {
class PanelCache;
}

// A run-time data error found by a kernel (an index out of range): the first one is kept,
// the kernel writes a neutral value and the run goes on; the backend then fails the request.
struct KernelError {
  std::atomic<bool> set{false};
  std::mutex mu;
  std::string message;
  void report(const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    if (!set.exchange(true)) message = m;
  }
};

struct RunCtx {
  int64_t batch = 1;
  uint8_t* arena = nullptr;
  float* workspace = nullptr;  // scratch shared by every kernel (largest request)
  ThreadPool* pool = nullptr;
  KernelError* error = nullptr;
};

// Where a tensor lives: a weight pointer, or an arena offset per sample.
struct TensorRef {
  const float* weight = nullptr;
  uint64_t offset = 0;  // per sample, bytes
  float* at(const RunCtx& c) const {
    return weight ? const_cast<float*>(weight)
                  : reinterpret_cast<float*>(c.arena + uint64_t(c.batch) * offset);
  }
  // The same address as another element type (plan v2 dtypes: int64, int32, bool = uint8).
  template <typename T>
  T* as(const RunCtx& c) const { return reinterpret_cast<T*>(at(c)); }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(const RunCtx& ctx) const = 0;
  // Scratch floats this kernel needs for a batch of `maxBatch` (shared, not per kernel).
  virtual uint64_t workspace_floats(int64_t /*maxBatch*/) const { return 0; }
  // Plan weights (their pointers into the mapping) that run() never reads because the kernel
  // computes from its own repacked copy, made at build: the backend may give their pages back
  // (weight_release.h) when no other reader needs them.
  virtual std::vector<const float*> repacked_weights() const { return {}; }
  // Which of an op's implementations this is, where it has several chosen at build (the
  // tests assert the one an environment switch asks for); "" where there is one.
  virtual const char* path() const { return ""; }
};

// A Conv's fused epilogue: y = act(conv + bias + residual) written to `output` (the backend
// proposes it for Conv -> Add -> Relu chains, taken only on the AVX-512 paths, and for
// Conv -> Relu/Clip/HardSwish/SiLU pairs, taken on every path).
struct ConvEpilogue {
  int32_t residual = -1;  // tensor added to the conv's output (same shape, an activation); -1: none
  int32_t output = -1;    // tensor the result goes to (the Relu's, or the Add's, or the activation's)
  bool relu = false;
  ConvAct act;            // without a residual: the activation op folded into the Conv (conv_act.h)
  bool over_input = false;        // `output` overlaps the conv's input (it dies at the conv)
  bool over_input_exact = false;  // ... and is exactly its bytes (the depthwise kernel takes that)
  mutable bool taken = false;  // set by make_conv when it fused
};

// A MatMul's fused epilogue (gemm_epilogue.cc proposes it for MatMul -> Add bias -> Gelu
// chains; make_matmul takes it where its weight is 2-D): y = act(x W + bias) to `output`.
struct GemmEpilogue {
  const float* bias = nullptr;  // [N], added to every row
  int32_t output = -1;          // tensor the result goes to (the Add's, or the Gelu's)
  bool gelu = false, gelu_tanh = false;
  int skip = 0;                 // ops after the MatMul that the epilogue replaces
  mutable bool taken = false;   // set by make_matmul when it fused
};

// The epilogue MatMul ops[i] can take, if any (false: none).
bool gemm_epilogue(const Plan& plan, size_t i, GemmEpilogue* e);

// Mul(x, scale) at ops[i] -> Add(., shift) [-> Relu], scale and shift per-channel weights and
// the intermediate tensors read nowhere else: one kernel, y = [relu](x * scale[c] + shift[c])
// (channel_affine.cc; an unfolded BatchNormalization).
struct ChannelAffine {
  int32_t x = -1, scale = -1, shift = -1, output = -1;
  bool relu = false;
  int skip = 0;  // ops after the Mul that the kernel replaces
};
bool channel_affine_chain(const Plan& plan, size_t i, ChannelAffine* a);

// Conv paths make_conv must not take (BuildCtx::conv_avoid): how the tuner (conv_tune.h) builds
// a conv's other kernels. Avoiding the direct kernel avoids Winograd too (it needs its layout).
enum ConvAvoid : uint32_t {
  kAvoidWinograd = 1u,
  kAvoidDirect = 2u,
  kAvoidPixelRows = 4u,
  kAvoidFlat = 8u,
};

struct BuildCtx {
  const Plan* plan = nullptr;
  int threads = 1;  // intra-op threads at run time (kernels with per-thread scratch size it by this)
  uint32_t conv_avoid = 0;  // ConvAvoid bits: paths make_conv skips, as if their switch were off
  const ConvEpilogue* epilogue = nullptr;  // for the Conv being built, when fusable
  const GemmEpilogue* gemm_epilogue = nullptr;  // for the MatMul being built, when fusable
  simd::PanelCache* panels = nullptr;  // packed dense-layer weights, shared by a Runtime's profiles
  TensorRef ref(int32_t id) const {
    const TensorInfo& t = plan->tensors[id];
    TensorRef r;
    if (t.is_weight()) r.weight = t.data;
    else r.offset = t.offset;
    return r;
  }
  const TensorInfo& info(int32_t id) const { return plan->tensors[id]; }
};

// Factories: nullptr + *status/*message on an unsupported shape or attribute.
using Factory = std::unique_ptr<Kernel> (*)(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_conv(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_conv_transpose(const BuildCtx&, const Op&, Status*, std::string*);  // conv_transpose.cc
std::unique_ptr<Kernel> make_gemm(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_matmul(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_binary(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_channel_affine(const BuildCtx&, const ChannelAffine&);
std::unique_ptr<Kernel> make_unary(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_pool(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_global_avg_pool(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_copy(const BuildCtx&, const Op&, Status*, std::string*);  // Flatten, Reshape
std::unique_ptr<Kernel> make_transpose(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_transpose_any(const BuildCtx&, const Op&, Status*, std::string*);  // batch moves
std::unique_ptr<Kernel> make_concat(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_softmax(const BuildCtx&, const Op&, Status*, std::string*);
// Transformer ops (layernorm.cc, matmul_batched.cc, elementwise_math.cc, reduce.cc).
std::unique_ptr<Kernel> make_layernorm(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_matmul_batched(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_math(const BuildCtx&, const Op&, Status*, std::string*);  // Pow, Sqrt, Exp, ...
std::unique_ptr<Kernel> make_reduce(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_attention(const BuildCtx&, const Op&, Status*, std::string*);  // attention.cc
// plan v2: run-time data of any dtype, the batch at any axis (elementwise.cc, gather.cc, slice.cc)
// make_binary also takes Mod, Equal, Less, Greater, And, Or on any dtype.
std::unique_ptr<Kernel> make_elementwise(const BuildCtx&, const Op&, Status*, std::string*);  // Where, Not, Cast, Expand
std::unique_ptr<Kernel> make_gather(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_slice(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_generator(const BuildCtx&, const Op&, Status*, std::string*);  // Range, ConstantOfShape
std::unique_ptr<Kernel> make_clip_hard(const BuildCtx&, const Op&, Status*, std::string*);  // Clip, HardSigmoid, HardSwish, SiLU
std::unique_ptr<Kernel> make_pad(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_split(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_lstm(const BuildCtx&, const Op&, Status*, std::string*);
std::unique_ptr<Kernel> make_gru(const BuildCtx&, const Op&, Status*, std::string*);  // gru.cc
std::unique_ptr<Kernel> make_gather_nd(const BuildCtx&, const Op&, Status*, std::string*);  // gather_nd.cc
std::unique_ptr<Kernel> make_cumsum(const BuildCtx&, const Op&, Status*, std::string*);  // cumsum.cc
std::unique_ptr<Kernel> make_argmax(const BuildCtx&, const Op&, Status*, std::string*);  // argmax.cc
std::unique_ptr<Kernel> make_topk(const BuildCtx&, const Op&, Status*, std::string*);  // topk.cc
std::unique_ptr<Kernel> make_gather_elements(const BuildCtx&, const Op&, Status*, std::string*);  // gather_elements.cc

// Shared helpers for factories.
std::string shape_str(const std::vector<int64_t>& s);
inline std::unique_ptr<Kernel> unsupported(const Op& op, const std::string& why, Status* st,
                                           std::string* msg) {
  *st = Status::kUnsupportedOp;
  *msg = std::string("op ") + op_type_name(op.type) + (op.name.empty() ? "" : " '" + op.name + "'") +
         ": " + why;
  return nullptr;
}
bool need_inputs(const Op& op, size_t min, size_t max, Status* st, std::string* msg);
// An op whose trailing outputs may be left out (LSTM's and GRU's Y, Y_h, Y_c): each present
// output i must have shape want[i]; it is bound to *refs[i] and *has[i] set. At most
// want.size() outputs.
struct OutputSlot {
  std::vector<int64_t> shape;
  TensorRef* ref;
  bool* present;
};
bool bind_outputs(const BuildCtx& bc, const Op& op, const std::vector<OutputSlot>& slots, Status* st, std::string* msg);

// Dims `d` seen along one axis: the rows before it, its length, the elements after it (an
// element (o, j, i) is at (o * len + j) * inner + i). ArgMax, TopK and CumSum run along one.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
inline AxisSplit split_at_axis(const std::vector<int64_t>& d, int axis) {
  AxisSplit s;
  for (int i = 0; i < axis; ++i) s.outer *= d[size_t(i)];
  s.len = d[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < d.size(); ++i) s.inner *= d[i];
  return s;
}

// y = max(y, 0) over n floats (fused activation).
void relu_inplace(float* y, int64_t n);

}  // namespace memlane::cpu
