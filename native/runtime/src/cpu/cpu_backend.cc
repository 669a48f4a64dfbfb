// The CPU backend: compiles the plan's ops into kernels once, allocates one 64-byte
// aligned arena plus one shared scratch buffer, then runs with no allocation. Weights are
// read in place from the plan's read-only mapping, except those a kernel repacks at prepare:
// their plan pages are given back (weight_release.h).
//
// A batch runs in chunks of at most `chunk_` samples through the whole network (the plan's
// batch scaling holds for any batch, so a chunk is just a smaller batch): the arena holds
// chunk_ x bytesPerSample, not maxBatch x bytesPerSample. Chunks keep a large batch's
// activations inside the L2 cache (a resnet-mini sample is 192 KiB of arena) and its
// resident memory bounded, at the cost of one sgemm per chunk instead of one per batch.
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <thread>

#include "backend.h"
#include "cpu/arena_unwritten.h"
#include "cpu/batch_tail.h"
#include "cpu/conv_pw_dw.h"
#include "cpu/conv_tune.h"
#include "cpu/denormals.h"
#include "cpu/env_count.h"
#include "cpu/kernel.h"
#include "cpu/plan_queries.h"
#include "cpu/op_profiler.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/gemm_panels.h"
#include "cpu/thread_choice.h"
#include "cpu/weight_release.h"

namespace memlane {
namespace {

// Arena bytes one chunk may take (MEMLANE_CHUNK_BYTES overrides; a tuning aid).
constexpr uint64_t kChunkArenaBytes = uint64_t(256) << 10;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};


using cpu::overlaps;
using cpu::read_elsewhere;
using cpu::trailing_relu;

// Conv (no activation) at ops[i] -> Add(its output, R) at i+1 -> optionally Relu at i+2, with
// the intermediate tensors read nowhere else: the Conv can write act(conv + R) straight to the
// last op's output. Only adjacent ops: a tensor alive in between could share that output's
// arena space (the planner gave it out from the Add or Relu on). Of the tensors alive at the
// Conv, only X and R may die before the output is born; it must not overlap X and must not
// partly overlap R.
bool residual_epilogue(const Plan& plan, size_t i, cpu::ConvEpilogue* e) {
  const auto& ops = plan.ops;
  if (i + 1 >= ops.size() || ops[i].attrs.activation != Activation::kNone || ops[i].outputs.size() != 1) return false;
  const Op& add = ops[i + 1];
  const int32_t t1 = ops[i].outputs[0];
  if (add.type != OpType::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) return false;
  if ((add.inputs[0] == t1) == (add.inputs[1] == t1)) return false;  // exactly one side
  const int32_t r = add.inputs[0] == t1 ? add.inputs[1] : add.inputs[0];
  if (read_elsewhere(plan, t1, i + 1)) return false;
  const int32_t relu_out = trailing_relu(plan, i + 2, add.outputs[0]);
  const bool relu = relu_out >= 0;
  const int32_t out = relu ? relu_out : add.outputs[0];
  const TensorInfo &T = plan.tensors[t1], &R = plan.tensors[r], &O = plan.tensors[out];
  const TensorInfo& X = plan.tensors[ops[i].inputs[0]];
  if (R.is_weight() || X.is_weight() || O.is_weight() || R.shape != T.shape || O.shape != T.shape) return false;
  if (overlaps(O, X) || (overlaps(O, R) && O.offset != R.offset)) return false;
  e->residual = r;
  e->output = out;
  e->relu = relu;
  return true;
}

// Conv (no activation) at ops[i] -> Relu / Clip / HardSwish / SiLU at i+1, the conv's output
// read nowhere else: the Conv applies the activation itself and writes the activation's
// output (saves a pass over the tensor; most paths apply it in registers before the store).
// Same arena rules as residual_epilogue, with no residual, except that
// the output may overlap the input (over_input; make_conv decides whether a path can take it).
bool activation_epilogue(const Plan& plan, size_t i, cpu::ConvEpilogue* e) {
  const auto& ops = plan.ops;
  if (i + 1 >= ops.size() || ops[i].attrs.activation != Activation::kNone || ops[i].outputs.size() != 1) return false;
  const Op& a = ops[i + 1];
  const int32_t t1 = ops[i].outputs[0];
  if (a.inputs.size() != 1 || a.inputs[0] != t1 || a.outputs.size() != 1 || read_elsewhere(plan, t1, i + 1)) return false;
  cpu::ConvAct act;
  if (!cpu::conv_act_of(a, &act)) return false;
  const int32_t out = a.outputs[0];
  const TensorInfo &T = plan.tensors[t1], &O = plan.tensors[out], &X = plan.tensors[ops[i].inputs[0]];
  if (X.is_weight() || O.is_weight() || O.shape != T.shape || O.dtype != T.dtype) return false;
  // The planner may give the activation's output the conv's input's place (the input dies at
  // the conv). make_conv decides: the depthwise kernel takes exactly the same bytes (it reads
  // each input channel whole before writing the same channel's output), the other paths copy
  // X first.
  e->over_input = overlaps(O, X);
  e->over_input_exact = e->over_input && O.offset == X.offset && O.bytes == X.bytes;
  e->residual = -1;
  e->output = out;
  e->act = act;
  return true;
}

// The v1-era float kernels assume float32 tensors with the batch first ([batch, ...]); a plan
// v2 op outside their contract is refused here, naming the tensor, instead of computed wrong.
// Element-wise float ops (unary, Reshape/Flatten copies) work on any layout.
bool v1_kernel_fits(const Plan& plan, const Op& op, std::string* why) {
  bool layout_free = false;
  switch (op.type) {
    case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh:
    case OpType::kErf: case OpType::kGelu:
    case OpType::kPow: case OpType::kSqrt: case OpType::kReciprocal: case OpType::kExp:
    case OpType::kNeg: case OpType::kLog: case OpType::kAbs: case OpType::kSin: case OpType::kCos:
    case OpType::kTan: case OpType::kAsin: case OpType::kAcos: case OpType::kAtan: case OpType::kSinh:
    case OpType::kCosh: case OpType::kAsinh: case OpType::kAcosh: case OpType::kAtanh:
    case OpType::kElu: case OpType::kSelu: case OpType::kCelu: case OpType::kSoftplus: case OpType::kSoftsign:
    case OpType::kMish: case OpType::kThresholdedRelu:
    case OpType::kClip: case OpType::kHardSigmoid: case OpType::kHardSwish: case OpType::kSiLU:
    // Row ops: their factories place the batch anywhere outside a row (docs/plan-format.md).
    case OpType::kGemm: case OpType::kMatMul:
    case OpType::kSoftmax: case OpType::kLogSoftmax:
    case OpType::kLayerNorm:
      layout_free = true;
      break;
    case OpType::kConv: case OpType::kConvTranspose: case OpType::kMaxPool:
    case OpType::kAveragePool: case OpType::kGlobalAveragePool: case OpType::kFlatten:
    case OpType::kReduceMean: case OpType::kReduceSum: case OpType::kReduceMax:
    case OpType::kAttention: case OpType::kPad: case OpType::kSplit: case OpType::kLSTM: case OpType::kGRU:
      break;
    default:
      return true;  // dtype- and layout-aware kernels check for themselves (Transpose: 4- and 8-byte elements)
  }
  std::vector<int32_t> ids = op.inputs;
  ids.insert(ids.end(), op.outputs.begin(), op.outputs.end());
  for (int32_t id : ids) {
    if (id == kAbsentInput) continue;
    const TensorInfo& t = plan.tensors[size_t(id)];
    if (t.dtype != DType::kFloat32) {
      *why = "tensor '" + t.name + "' is " + dtype_name(t.dtype) + "; this kernel computes on float32 only";
      return false;
    }
    // Split also takes k·batch first (-k at axis 0: Swin's windows merged into the batch; split.cc).
    const bool batch_multiple_first = op.type == OpType::kSplit && !t.shape.empty() && t.shape[0] < -1;
    if (!layout_free && !t.is_weight() && !t.batch_first() && !batch_multiple_first) {
      *why = "tensor '" + t.name + "' has shape " + cpu::shape_str(t.shape) + "; this kernel needs the batch first (-1 at axis 0)";
      return false;
    }
  }
  return true;
}

// Whether an op's result for a sample depends on the other samples of the batch, so that a
// chunk of samples computes something else than the whole batch: a Range counts the whole
// batch; run-time indices into the data's batch axis (GatherND tuples over it, a Gather or a
// GatherElements along it) are sample numbers of the whole batch; a CumSum along the batch
// axis sums over samples. src/compiler/native-chunk.ts mirrors this rule.
bool mixes_samples(const Plan& plan, const Op& op) {
  if (op.type == OpType::kRange) return true;
  if (op.inputs.empty() || op.inputs[0] == kAbsentInput) return false;
  const int bax = plan.tensors[size_t(op.inputs[0])].batch_axis();
  if (bax < 0) return false;
  switch (op.type) {
    case OpType::kGather: case OpType::kGatherElements: case OpType::kCumSum:
      return bax == op.attrs.axis;
    case OpType::kGatherND: {
      if (op.inputs.size() < 2 || op.inputs[1] == kAbsentInput) return false;
      const TensorInfo& idx = plan.tensors[size_t(op.inputs[1])];
      return !idx.shape.empty() && bax < idx.shape.back();
    }
    default:
      return false;
  }
}

// ops[oi]'s kernel, built against `plan` (a Conv or MatMul may fold the ops after it into its
// epilogue: *skip is then how many; a Conv's kernel is the tuner's choice where there is one).
// nullptr + *st / *message where unsupported.
std::unique_ptr<cpu::Kernel> make_kernel(cpu::BuildCtx& bc, const Plan& plan, size_t oi, size_t* skip, Status* st_out,
                                         std::string* message, cpu::ConvTuner* tuner) {
  const Op& op = plan.ops[oi];
  Status st = Status::kOk;
  std::unique_ptr<cpu::Kernel> k;
  cpu::ConvEpilogue epi;
  if (std::string why; !v1_kernel_fits(plan, op, &why)) {
    *message = std::string("op ") + op_type_name(op.type) + " '" + op.name + "': " + why;
    *st_out = Status::kUnsupportedOp;
    return nullptr;
  }
      switch (op.type) {
        case OpType::kConv:
          // A 1x1 conv and the depthwise conv reading its output: one kernel (conv_pw_dw.h).
          if (cpu::PointwiseDepthwise pd; cpu::pointwise_depthwise_chain(plan, oi, &pd)) {
            k = cpu::make_pointwise_depthwise(bc, oi, pd);
            if (k) {
              *skip = pd.skip;
              break;
            }
          }
          bc.epilogue = residual_epilogue(plan, oi, &epi) || activation_epilogue(plan, oi, &epi) ? &epi : nullptr;
          k = cpu::make_conv(bc, op, &st, message);
          if (k && tuner) k = tuner->choose(bc, op, std::move(k));
          bc.epilogue = nullptr;
          if (k && epi.taken) *skip = epi.relu ? 2 : 1;
          break;
        case OpType::kConvTranspose: k = cpu::make_conv_transpose(bc, op, &st, message); break;
        case OpType::kGemm: k = cpu::make_gemm(bc, op, &st, message); break;
        case OpType::kMatMul: {
          cpu::GemmEpilogue ge;  // MatMul -> Add bias [-> Gelu] in one kernel (gemm_epilogue.cc)
          bc.gemm_epilogue = cpu::gemm_epilogue(plan, oi, &ge) ? &ge : nullptr;
          k = cpu::make_matmul(bc, op, &st, message);
          bc.gemm_epilogue = nullptr;
          if (k && ge.taken) *skip = size_t(ge.skip);
          break;
        }
        case OpType::kMul:
          if (cpu::ChannelAffine ca; cpu::channel_affine_chain(plan, oi, &ca)) {
            k = cpu::make_channel_affine(bc, ca);
            *skip = size_t(ca.skip);
          } else {
            k = cpu::make_binary(bc, op, &st, message);
          }
          break;
        case OpType::kAdd: case OpType::kSub: case OpType::kDiv:
          k = cpu::make_binary(bc, op, &st, message); break;
        case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh:
        case OpType::kErf: case OpType::kGelu:
          k = cpu::make_unary(bc, op, &st, message); break;
        case OpType::kMaxPool: case OpType::kAveragePool: k = cpu::make_pool(bc, op, &st, message); break;
        case OpType::kGlobalAveragePool: k = cpu::make_global_avg_pool(bc, op, &st, message); break;
        case OpType::kFlatten: case OpType::kReshape: k = cpu::make_copy(bc, op, &st, message); break;
        case OpType::kTranspose: k = cpu::make_transpose(bc, op, &st, message); break;
        case OpType::kConcat: k = cpu::make_concat(bc, op, &st, message); break;
        case OpType::kSoftmax: case OpType::kLogSoftmax: k = cpu::make_softmax(bc, op, &st, message); break;
        case OpType::kLayerNorm: k = cpu::make_layernorm(bc, op, &st, message); break;
        case OpType::kPow: case OpType::kSqrt: case OpType::kReciprocal: case OpType::kExp:
        case OpType::kNeg: case OpType::kLog: case OpType::kAbs: case OpType::kSin: case OpType::kCos:
        case OpType::kTan: case OpType::kAsin: case OpType::kAcos: case OpType::kAtan: case OpType::kSinh:
        case OpType::kCosh: case OpType::kAsinh: case OpType::kAcosh: case OpType::kAtanh:
        case OpType::kElu: case OpType::kSelu: case OpType::kCelu: case OpType::kSoftplus: case OpType::kSoftsign:
        case OpType::kMish: case OpType::kThresholdedRelu:
          k = cpu::make_math(bc, op, &st, message); break;
        case OpType::kReduceMean: case OpType::kReduceSum: case OpType::kReduceMax:
          k = cpu::make_reduce(bc, op, &st, message); break;
        case OpType::kAttention: k = cpu::make_attention(bc, op, &st, message); break;
        case OpType::kMod: case OpType::kEqual: case OpType::kLess: case OpType::kGreater:
        case OpType::kAnd: case OpType::kOr: case OpType::kLessOrEqual: case OpType::kGreaterOrEqual:
          k = cpu::make_binary(bc, op, &st, message); break;
        case OpType::kWhere: case OpType::kNot: case OpType::kCast: case OpType::kExpand:
          k = cpu::make_elementwise(bc, op, &st, message); break;
        case OpType::kGather: k = cpu::make_gather(bc, op, &st, message); break;
        case OpType::kSlice: k = cpu::make_slice(bc, op, &st, message); break;
        case OpType::kRange: case OpType::kConstantOfShape: k = cpu::make_generator(bc, op, &st, message); break;
        case OpType::kClip: case OpType::kHardSigmoid: case OpType::kHardSwish: case OpType::kSiLU:
          k = cpu::make_clip_hard(bc, op, &st, message); break;
        case OpType::kPad: k = cpu::make_pad(bc, op, &st, message); break;
        case OpType::kSplit: k = cpu::make_split(bc, op, &st, message); break;
        case OpType::kLSTM: k = cpu::make_lstm(bc, op, &st, message); break;
        case OpType::kGRU: k = cpu::make_gru(bc, op, &st, message); break;
        case OpType::kMax: case OpType::kMin: case OpType::kPRelu: k = cpu::make_binary(bc, op, &st, message); break;
        case OpType::kGatherND: k = cpu::make_gather_nd(bc, op, &st, message); break;
        case OpType::kCumSum: k = cpu::make_cumsum(bc, op, &st, message); break;
        case OpType::kArgMax: k = cpu::make_argmax(bc, op, &st, message); break;
        case OpType::kTopK: k = cpu::make_topk(bc, op, &st, message); break;
        case OpType::kGatherElements: k = cpu::make_gather_elements(bc, op, &st, message); break;
      }
  *st_out = k ? Status::kOk : (st == Status::kOk ? Status::kUnsupportedOp : st);
  return k;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : opts_(o) {
    int t = o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency());
    threads_ = t < 1 ? 1 : t;
    if (o.sharedHost && o.sharedHost->cpuPool && o.sharedHost->cpuPool->threads() == threads_) pool_ = o.sharedHost->cpuPool;
    else pool_ = std::make_shared<cpu::ThreadPool>(threads_);
    if (o.sharedHost && !o.sharedHost->cpuPool) o.sharedHost->cpuPool = pool_;
    if (o.sharedHost && !o.sharedHost->cpuPanels) o.sharedHost->cpuPanels = std::make_shared<cpu::simd::PanelCache>();
    panels_ = o.sharedHost ? o.sharedHost->cpuPanels : std::make_shared<cpu::simd::PanelCache>();
    choice_ = std::make_unique<cpu::ThreadChoice>(threads_);
  }

  const char* name() const override { return "cpu"; }

  Status prepare(const Plan& plan, int64_t maxBatch, std::string* message) override {
    if (plan_) {
      *message = "prepare called twice";
      return Status::kInvalidArgument;
    }
    if (maxBatch < 1) {
      *message = "maxBatch: expected >= 1, found " + std::to_string(maxBatch);
      return Status::kInvalidArgument;
    }
    uint64_t budget = kChunkArenaBytes;
    if (const char* e = std::getenv("MEMLANE_CHUNK_BYTES"); e && std::atoll(e) > 0) budget = uint64_t(std::atoll(e));
    // Chunks of samples only where a chunk is a smaller batch: every tensor batch-first, and no
    // op that reaches across samples. Otherwise the whole batch runs at once.
    bool chunkable = plan.batchFirst;
    for (const Op& op : plan.ops) chunkable = chunkable && !mixes_samples(plan, op);
    // Concat inputs in place lie in one sample's slice of their output (plan/concat_in_place.h):
    // such a plan runs one sample at a time, which only a chunkable plan can.
    if (plan.concatInPlace && !chunkable) {
      *message = "arena.concatInPlace: expected a plan that runs one sample at a time (every tensor batch first, no op "
                 "across samples), found one that runs whole batches; recompile it from its ONNX model";
      return Status::kInvalidArgument;
    }
    const int64_t chunk = !chunkable ? maxBatch
                          : plan.concatInPlace ? 1
                                               : std::clamp<int64_t>(plan.bytesPerSample ? int64_t(budget / plan.bytesPerSample) : maxBatch,
                                                                     1, maxBatch);
    // With several threads a batch's chunks run side by side, one lane a thread, each with its
    // own slice of the arena and of the workspace (the kernels then run single-threaded):
    // samples are independent, so this scales where splitting one small op does not.
    const int64_t lanes = chunkable && threads_ > 1 && maxBatch > 1 ? threads_ : 1;
    const int64_t laneChunk = std::min(chunk, (maxBatch + lanes - 1) / lanes);
    // Where a batch is split, the weight-heavy last ops run once over the whole of it
    // (batch_tail.h). Its arena per sample is reported either way: memlane estimate's native
    // load probe loads at maxBatch 1 and applies it to the batches a run will split.
    // The tail stays here after it is kept: its unwritten bytes and workspace are reported too.
    const cpu::BatchTail tail = chunkable ? cpu::plan_batch_tail(plan) : cpu::BatchTail{};
    const uint64_t tailBytesPerSample = tail.empty() ? 0 : tail.tail.bytesPerSample;
    if (laneChunk < maxBatch) tail_ = tail;
    std::vector<std::unique_ptr<cpu::Kernel>> kernels;
    // Convs with several kernels keep the one that ran fastest here (conv_tune.h); the tuner and
    // its scratch go once the kernels are built.
    // Weights that only a kernel's repacked copy reads: their plan pages go back to the file.
    cpu::RepackedWeightRelease release(plan);
    std::unique_ptr<cpu::ConvTuner> tuner;
    if (cpu::env_count("MEMLANE_CONV_TUNE", opts_.tuneConvs ? 1 : 0) != 0)
      tuner = std::make_unique<cpu::ConvTuner>(pool_.get(), release.releasing());
    // Builds the ops of `p` (the plan, or the prefix's or the tail's view of it: ops
    // [base, base + p.ops.size()) of the plan), sizing their workspace for `batch` samples.
    // `wsByBatch`: the largest kernel workspace for 2^i samples at once, which memlane
    // estimate's load probe (at maxBatch 1) reads for the run's batches.
    std::vector<uint64_t> wsByBatch(kWorkspaceCurvePoints, 0);
    auto build = [&](const Plan& p, size_t base, int64_t batch, uint64_t* ws) {
      cpu::BuildCtx bc{&p, threads_};
      bc.panels = panels_.get();
      size_t skip = 0;  // ops folded into the previous kernel's epilogue (no kernel)
      for (size_t i = 0; i < p.ops.size(); ++i) {
        if (skip) {
          --skip;
          kernels.push_back(nullptr);
          release.op_built(base + i, nullptr);
          continue;
        }
        Status st = Status::kOk;
        auto k = make_kernel(bc, p, i, &skip, &st, message, tuner.get());
        if (!k) return st;
        *ws = std::max(*ws, k->workspace_floats(batch));
        for (int j = 0; j < kWorkspaceCurvePoints; ++j) wsByBatch[j] = std::max(wsByBatch[j], k->workspace_floats(int64_t(1) << j));
        release.op_built(base + i, k.get());
        kernels.push_back(std::move(k));
      }
      return Status::kOk;
    };
    uint64_t ws = 0, tailWs = 0;
    if (Status st = build(tail_.empty() ? plan : tail_.prefix, 0, chunk, &ws); st != Status::kOk) return st;
    if (!tail_.empty())
      if (Status st = build(tail_.tail, tail_.start, maxBatch, &tailWs); st != Status::kOk) return st;
    const std::string tuneNote = tuner ? tuner->note() : "";
    tuner.reset();  // its scratch goes before the arena comes
    // Refuse an arena the machine cannot hold (or whose size overflows) up front, instead of
    // an overcommitted allocation that the first run would fault in until the OOM killer.
    uint64_t arena_bytes = 0;
    const uint64_t phys = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    // (A batch of maxBatch must fit too: its inputs and outputs are the caller's, at that size.)
    uint64_t batch_bytes = 0;
    if (__builtin_mul_overflow(uint64_t(maxBatch), plan.bytesPerSample, &batch_bytes) || batch_bytes > phys ||
        ws > phys / sizeof(float)) {
      *message = "arena of maxBatch " + std::to_string(maxBatch) + " x " + std::to_string(plan.bytesPerSample) +
                 " bytes per sample (and workspace of " + std::to_string(ws) + " floats) exceeds physical memory (" +
                 std::to_string(phys) + " bytes)";
      return Status::kOutOfMemory;
    }
    ws = (ws + 15) / 16 * 16;  // lane slices stay 64-byte aligned
    // The lanes' arenas, then the tail's (its batch of maxBatch); the tail's kernels run after
    // the lanes, on the whole workspace.
    laneArena_ = uint64_t(laneChunk) * plan.bytesPerSample;
    tailArenaOffset_ = (uint64_t(lanes) * laneArena_ + 63) / 64 * 64;
    arena_bytes = tailArenaOffset_ + uint64_t(maxBatch) * (tail_.empty() ? 0 : tail_.tail.bytesPerSample);
    const uint64_t ws_total = std::max(uint64_t(lanes) * ws, tailWs);
    bool allocated;
    if (const auto& sh = opts_.sharedHost) {  // one backend per shape profile: the largest arena serves all
      allocated = sh->reserve(SharedHostBuffers::kArena, arena_bytes) &&
                  (!ws_total || sh->reserve(SharedHostBuffers::kWorkspace, ws_total * sizeof(float)));
    } else {
      arena_.reset(static_cast<uint8_t*>(alloc_cache_lines(arena_bytes)));
      workspace_.reset(ws_total ? static_cast<float*>(alloc_cache_lines(ws_total * sizeof(float))) : nullptr);
      allocated = arena_ && (!ws_total || workspace_);
    }
    lanes_ = lanes;
    laneChunk_ = laneChunk;
    laneWs_ = ws;
    wsTotal_ = ws_total;
    serial_ = std::make_unique<cpu::ThreadPool>(1);
    if (!allocated) {
      *message = "arena of " + std::to_string(arena_bytes) + " bytes and workspace of " +
                 std::to_string(ws_total * 4) + " bytes could not be allocated";
      return Status::kOutOfMemory;
    }
    for (uint32_t id : plan.inputs) in_.push_back(&plan.tensors[id]);
    for (uint32_t id : plan.outputs) out_.push_back(&plan.tensors[id]);
    notes_ = release.note();
    if (!tuneNote.empty()) notes_ = notes_.empty() ? tuneNote : notes_ + "; " + tuneNote;
    if (!tail_.empty()) {
      const std::string t = "batch tail: ops " + std::to_string(tail_.start) + ".." + std::to_string(plan.ops.size() - 1) +
                            " ('" + plan.ops[tail_.start].name + "' on) run over the whole batch, " +
                            std::to_string(tail_.tail.bytesPerSample) + " B of arena a sample";
      notes_ = notes_.empty() ? t : notes_ + "; " + t;
    }
    kernels_ = std::move(kernels);
    stats_.arenaBytes = arena_bytes;
    stats_.workspaceBytes = ws_total * sizeof(float);
    stats_.batchTailBytesPerSample = tailBytesPerSample;
    stats_.arenaUnwrittenBytesPerSample = cpu::arena_unwritten_bytes_per_sample(plan, kernels_, prefix_kernels());
    stats_.workspaceBytesByBatch.clear();
    for (uint64_t f : wsByBatch) stats_.workspaceBytesByBatch.push_back(f * sizeof(float));
    // The tail's kernels are plan ops [tail.start, n) whether built as its view or as the whole
    // plan's (a load at maxBatch 1, memlane estimate's probe, splits nothing).
    stats_.batchTailUnwrittenBytesPerSample =
        tail.empty() ? 0 : cpu::arena_unwritten_bytes_per_sample(tail.tail, kernels_, tail.tail.ops.size(), tail.start);
    stats_.batchTailWorkspaceBytesByBatch.clear();
    if (!tail.empty()) {
      for (int j = 0; j < kWorkspaceCurvePoints; ++j) {
        uint64_t floats = 0;
        for (size_t i = tail.start; i < kernels_.size(); ++i)
          if (kernels_[i]) floats = std::max(floats, kernels_[i]->workspace_floats(int64_t(1) << j));
        stats_.batchTailWorkspaceBytesByBatch.push_back(floats * sizeof(float));
      }
    }
    stats_.weightBytesMapped = plan.weightBytes;
    stats_.weightBytesReleased = release.released_bytes();
    maxBatch_ = maxBatch;
    chunk_ = laneChunk;  // the serial path (batch 1, profiling) uses lane 0
    plan_ = &plan;
    // OpenBLAS stays single-threaded: the kernels split their products on pool_ themselves
    // (sgemm_pool.h). Its own pthread workers spin after every call, taking the cores from the
    // pool's next kernels, and each batch lane's call would start threads of its own.
    openblas_set_num_threads(cpu::blas_threads());
    // MEMLANE_PROFILE=1: time every op and print the mean per op at destruction (tuning aid).
    if (const char* p = std::getenv("MEMLANE_PROFILE"); p && *p == '1') {
      profiler_.start(kernels_.size());
      dumpProfile_ = true;
    }
    return Status::kOk;
  }

  Status run(int64_t batch, const float* const* inputs, float* const* outputs, std::string* message) override {
    if (!plan_) {
      *message = "no plan prepared";
      return Status::kNotLoaded;
    }
    if (batch < 1 || batch > maxBatch_) {
      *message = "batch: expected 1.." + std::to_string(maxBatch_) + ", found " + std::to_string(batch);
      return Status::kInvalidArgument;
    }
    cpu::KernelError error;
    const cpu::DenormalsFlushed flushed;     // cpu/denormals.h: no microcode assists
    const cpu::ThreadPool::Hot hot(*pool_);  // the workers stay awake through the run
    const bool lanes = lanes_ > 1 && batch > 1 && !profiler_.on();
    // A run whose every op splits across the pool may go to the caller alone while the two
    // CPUs share no cache (thread_choice.h). Batch lanes write only their own samples, and a
    // profile times what the run was asked for.
    const bool choose = !lanes && !profiler_.on() && choice_->enabled();
    const auto mode = choose ? choice_->decide(batch) : cpu::ThreadChoice::kPool;
    cpu::ThreadPool* pool = mode == cpu::ThreadChoice::kCaller ? serial_.get() : pool_.get();
    const auto started = std::chrono::steady_clock::now();
    if (lanes) run_lanes(batch, inputs, outputs, &error);
    else run_chunks(batch, inputs, outputs, pool, &error);
    if (!tail_.empty()) run_tail(batch, inputs, outputs, pool, &error);
    if (choose) {
      choice_->record(batch, mode, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count());
      choice_->probe_if_due(*pool_);  // the next run's placement, read while the worker still polls
    }
    if (profiler_.on()) profiler_.end_run();
    if (error.set) {
      *message = error.message;
      return Status::kInvalidArgument;
    }
    return Status::kOk;
  }

  // Samples [n0, n0 + cnt) through the ops before the tail (all of them where there is none),
  // in `arena` (a lane's, laid out for cnt samples): inputs in, the prefix's outputs out, and
  // what the tail reads from the prefix into the tail's arena at those samples' rows.
  void run_chunk(int64_t n0, int64_t cnt, int64_t batch, uint8_t* arena, float* ws, cpu::ThreadPool* pool,
                 const float* const* inputs, float* const* outputs, cpu::KernelError* error) {
    const uint64_t n = uint64_t(cnt);
    cpu::RunCtx c{cnt, arena, ws, pool, error};
    for (size_t i = 0; i < in_.size(); ++i)
      std::memcpy(arena + n * in_[i]->offset, reinterpret_cast<const uint8_t*>(inputs[i]) + n0 * in_[i]->bytes,
                  n * in_[i]->bytes);
    run_kernels(c, 0, prefix_kernels());
    for (size_t i = 0; i < out_.size(); ++i)
      if (tail_.empty() || !tail_.outputFromTail[i])
        std::memcpy(reinterpret_cast<uint8_t*>(outputs[i]) + n0 * out_[i]->bytes, arena + n * out_[i]->offset,
                    n * out_[i]->bytes);
    for (int32_t id : tail_.carried) {
      const uint64_t bytes = plan_->tensors[size_t(id)].bytes;
      std::memcpy(tailArena() + uint64_t(batch) * tail_.tail.tensors[size_t(id)].offset + uint64_t(n0) * bytes,
                  arena + n * plan_->tensors[size_t(id)].offset, n * bytes);
    }
  }

  void run_chunks(int64_t batch, const float* const* inputs, float* const* outputs, cpu::ThreadPool* pool, cpu::KernelError* error) {
    for (int64_t n0 = 0; n0 < batch; n0 += chunk_)
      run_chunk(n0, std::min(chunk_, batch - n0), batch, arena(), workspace(), pool, inputs, outputs, error);
  }

  // Chunks of about batch / lanes samples (at most laneChunk_), lane l taking chunks l,
  // l + lanes, ...: every lane has work and the batch's chunks stay balanced.
  void run_lanes(int64_t batch, const float* const* inputs, float* const* outputs, cpu::KernelError* error) {
    const int64_t cs = std::min(laneChunk_, (batch + lanes_ - 1) / lanes_), chunks = (batch + cs - 1) / cs;
    pool_->parallel_for(lanes_, 1, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        uint8_t* arena = this->arena() + uint64_t(l) * laneArena_;
        float* ws = workspace() ? workspace() + uint64_t(l) * laneWs_ : nullptr;
        for (int64_t ci = l; ci < chunks; ci += lanes_)
          run_chunk(ci * cs, std::min(cs, batch - ci * cs), batch, arena, ws, serial_.get(), inputs, outputs, error);
      }
    });
  }

  // The tail's ops over the whole batch, on the pool's threads (batch_tail.h): the graph inputs
  // it reads in, its outputs out; what it reads from the prefix is already in its arena.
  void run_tail(int64_t batch, const float* const* inputs, float* const* outputs, cpu::ThreadPool* pool, cpu::KernelError* error) {
    const uint64_t n = uint64_t(batch);
    uint8_t* arena = tailArena();
    for (size_t i = 0; i < in_.size(); ++i)
      if (std::find(tail_.inputs.begin(), tail_.inputs.end(), plan_->inputs[i]) != tail_.inputs.end())
        std::memcpy(arena + n * tail_.tail.tensors[plan_->inputs[i]].offset, inputs[i], n * in_[i]->bytes);
    cpu::RunCtx c{batch, arena, workspace(), pool, error};
    run_kernels(c, tail_.start, kernels_.size());
    for (size_t i = 0; i < out_.size(); ++i)
      if (tail_.outputFromTail[i])
        std::memcpy(outputs[i], arena + n * tail_.tail.tensors[plan_->outputs[i]].offset, n * out_[i]->bytes);
  }

  // Kernels [first, last) (plan op indices), timed one by one while profiling (summed over a
  // run's chunks).
  void run_kernels(const cpu::RunCtx& c, size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      if (!kernels_[i]) continue;
      if (profiler_.on()) profiler_.time(i, [&] { kernels_[i]->run(c); });
      else kernels_[i]->run(c);
    }
  }

  size_t prefix_kernels() const { return tail_.empty() ? kernels_.size() : tail_.start; }

  bool set_profiling(bool on) override {
    if (!plan_) return false;  // nothing prepared: no ops to time
    if (on) profiler_.start(kernels_.size());
    else profiler_.stop();
    return true;
  }

  OpProfile op_profile() const override { return plan_ ? profiler_.result(*plan_, kernel_paths()) : OpProfile(); }

  // Each plan op's kernel path (null: folded into the kernel before it).
  std::vector<const char*> kernel_paths() const {
    std::vector<const char*> h;
    for (const auto& k : kernels_) h.push_back(k ? k->path() : nullptr);
    return h;
  }

  MemoryStats memory_stats() const override { return stats_; }

  std::string notes() const override {
    if (choice_->split_runs() == 0) return notes_;
    // Read after the runs (the worker's result, memlane-bench): how many met a split placement.
    const std::string split = std::to_string(choice_->split_runs()) + " runs while the 2 CPUs shared no cache, " +
                              std::to_string(choice_->caller_runs()) + " of them on the calling thread alone (thread_choice.h)";
    return notes_.empty() ? split : notes_ + "; " + split;
  }

  ~CpuBackend() override {
    if (dumpProfile_ && plan_) profiler_.print(*plan_, kernel_paths(), stderr);
  }

 private:
  // This backend's own arena and workspace, or the Runtime's shared ones (SharedHostBuffers).
  uint8_t* arena() const {
    return opts_.sharedHost ? opts_.sharedHost->data(SharedHostBuffers::kArena) : arena_.get();
  }
  uint8_t* tailArena() const { return arena() + tailArenaOffset_; }
  float* workspace() const {
    if (!wsTotal_) return nullptr;
    return opts_.sharedHost ? reinterpret_cast<float*>(opts_.sharedHost->data(SharedHostBuffers::kWorkspace)) : workspace_.get();
  }

  BackendOptions opts_;
  int threads_ = 1;
  std::shared_ptr<cpu::ThreadPool> pool_;  // shared by a Runtime's profiles (SharedHostBuffers)
  std::shared_ptr<cpu::simd::PanelCache> panels_;  // likewise
  const Plan* plan_ = nullptr;
  int64_t maxBatch_ = 0;
  int64_t chunk_ = 1;  // samples per pass through the network (arena = chunk_ x bytesPerSample)
  int64_t lanes_ = 1, laneChunk_ = 1;  // batch lanes run side by side (threads > 1), samples each
  uint64_t laneWs_ = 0;                // workspace floats a lane
  uint64_t wsTotal_ = 0;               // workspace floats in all (the lanes', or the tail's if more)
  uint64_t laneArena_ = 0;             // arena bytes a lane
  uint64_t tailArenaOffset_ = 0;       // where the tail's arena starts (after the lanes')
  cpu::BatchTail tail_;                // the ops run over the whole batch (batch_tail.h); empty: none
  std::unique_ptr<cpu::ThreadPool> serial_;  // the kernels' pool inside a lane, or of a run on the caller alone (runs inline)
  std::unique_ptr<cpu::ThreadChoice> choice_;  // pool or caller alone, on a split placement (thread_choice.h)
  std::vector<std::unique_ptr<cpu::Kernel>> kernels_;
  std::vector<const TensorInfo*> in_, out_;
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  std::unique_ptr<float, FreeDeleter> workspace_;
  MemoryStats stats_;
  cpu::OpProfiler profiler_;  // per-op time while on (set_profiling, MEMLANE_PROFILE=1)
  bool dumpProfile_ = false;  // MEMLANE_PROFILE=1: print the profile at destruction
  std::string notes_;  // the plan pages of repacked weights given back, the batch tail (notes())
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, Status* status, std::string* message) {
  if (options.threads < 0) {
    *status = Status::kInvalidArgument;
    *message = "threads: expected >= 0, found " + std::to_string(options.threads);
    return nullptr;
  }
  *status = Status::kOk;
  return std::make_unique<CpuBackend>(options);
}

}  // namespace memlane
