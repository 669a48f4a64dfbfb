// The parsed plan: what a backend computes from. Produced by read_plan()/parse_plan()
// (plan_reader.cc) from a read-only mapping of the .mlplan file; weight tensors point
// into that mapping (never copied), so the PlanFile must outlive every Backend built on it.
// See docs/plan-format.md for the meaning of every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "status.h"

namespace memlane {

// Element types of plan v2 (docs/plan-format.md); bool is one byte, 0 or 1.
enum class DType : uint8_t { kFloat32, kInt64, kInt32, kBool };
inline size_t dtype_size(DType t) { return t == DType::kInt64 ? 8 : t == DType::kBool ? 1 : 4; }
const char* dtype_name(DType t);
bool parse_dtype(const std::string& s, DType* t);
enum class TensorKind : uint8_t { kInput, kOutput, kActivation, kWeight };

struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  // Non-weights: exactly one entry -k, the batch times k, at any axis (graph inputs and
  // outputs: k = 1). Weights: all entries >= 0.
  std::vector<int64_t> shape;
  TensorKind kind = TensorKind::kActivation;
  // Weight: byte offset from the blob start and total bytes.
  // Others: arena byte offset PER SAMPLE and bytes PER SAMPLE (scale by the batch n).
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Weight only: pointer into the read-only mapping (blob + offset). nullptr otherwise.
  // `data` is the same address for float32 kernels; other dtypes read `raw`.
  const float* data = nullptr;
  const uint8_t* raw = nullptr;

  bool is_weight() const { return kind == TensorKind::kWeight; }
  // Elements per sample (non-weights: a dim -k counts k) or total elements (weights).
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d < 0 ? -d : d;
    return n;
  }
  // Axis of the batch (-1 for weights) and its multiple k.
  int batch_axis() const {
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] < 0) return int(i);
    return -1;
  }
  // The v1 layout every float kernel of the first plan format assumes: [batch, ...].
  bool batch_first() const { return !shape.empty() && shape[0] == -1; }
  // The shape for a batch of n (weights: unchanged).
  std::vector<int64_t> resolved(int64_t n) const {
    std::vector<int64_t> s = shape;
    for (auto& d : s)
      if (d < 0) d = -d * n;
    return s;
  }
};

enum class OpType : uint8_t {
  kConv, kGemm, kMatMul,
  kAdd, kSub, kMul, kDiv,
  kRelu, kLeakyRelu, kSigmoid, kTanh, kErf, kGelu,
  kMaxPool, kAveragePool, kGlobalAveragePool,
  kFlatten, kReshape, kTranspose, kConcat, kSoftmax,
  // Transformer ops (float32 activations).
  kLayerNorm, kPow, kSqrt, kReciprocal, kExp, kNeg, kLog, kAbs,
  kReduceMean, kReduceSum, kReduceMax,
  kAttention,  // fused softmax(Q x Kt * scale + mask) x V
  // plan v2: run-time data of any dtype
  kGather, kCast, kWhere, kEqual, kLess, kGreater, kNot, kAnd, kOr, kMod,
  kExpand, kSlice, kRange, kConstantOfShape, kLessOrEqual, kGreaterOrEqual,
  // CNN activations and data movement, LSTM (appended: the order is the cuda name table's).
  kClip, kHardSigmoid, kHardSwish, kSiLU, kPad, kSplit, kLSTM,
  // Element-wise Max/Min on any numeric dtype, GatherND (batch_dims 0) on run-time indices.
  kMax, kMin, kGatherND,
  // RoBERTa-family position ids: CumSum along one axis, GatherElements on run-time indices.
  kCumSum, kGatherElements,
  // RoPE's cos/sin tables, computed from run-time positions in decoder LLMs (appended: the order is the cuda name table's).
  kSin, kCos,
  // CLIP's text pooling: the position of each sequence's maximum (int64 out).
  kArgMax,
  // The remaining ONNX float activations and trigonometry (Mamba's Softplus, YOSO's Acos,
  // EnCodec's Elu, SELU nets), and PRelu: a slope broadcast onto x (MobileFaceNet-style nets).
  kElu, kSelu, kCelu, kSoftplus, kSoftsign, kMish, kThresholdedRelu,
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kPRelu,
  // U-Net decoders, FCN and GAN upsamplers, vocoders (1-D as 2-D): weight [group, M/group, kh, kw, C/group].
  kConvTranspose,
  // log(softmax(x)) as one op (classifier heads trained with NLLLoss, the MNIST example's).
  kLogSoftmax,
  // The LSTM's sibling (speech and time-series nets), batch-first like it; the CPU backend only.
  kGRU,
  // The k largest or smallest of each row and their int64 indices (a top-5 head, candidates).
  kTopK,
};
const char* op_type_name(OpType t);

enum class Activation : uint8_t { kNone, kRelu };
enum class PadMode : uint8_t { kConstant, kReflect, kEdge };
enum class LstmDirection : uint8_t { kForward, kReverse, kBidirectional };

// Typed attributes: one flat struct, each op reads the fields its row in the doc lists.
// The compiler resolved every ONNX default; the reader fills the rest with neutral values.
struct OpAttrs {
  // Conv, ConvTranspose, MaxPool, AveragePool (2-D only in v1). ConvTranspose's pads may be
  // negative (an output_shape beyond the window's).
  int kernel[2] = {1, 1};
  int strides[2] = {1, 1};
  int pads[4] = {0, 0, 0, 0};  // top, left, bottom, right
  int dilations[2] = {1, 1};
  int group = 1;                 // Conv, ConvTranspose
  bool ceilMode = false;         // pools
  bool countIncludePad = false;  // AveragePool
  // Gemm
  float alpha = 1.0f;  // Gemm alpha, LeakyRelu alpha (default 0.01 set by the reader), Elu, Celu,
                       // ThresholdedRelu (1.0), Selu (1.67326...)
  float beta = 1.0f;
  float gamma = 1.0f;  // Selu (1.0507...)
  bool transA = false;
  bool transB = false;
  Activation activation = Activation::kNone;  // Conv, Gemm
  bool geluTanh = false;                      // Gelu approximate == "tanh"
  int axis = 1;                               // Flatten, Concat (full rank, >= 1), Softmax (not the batch's),
                                              // Gather, CumSum, GatherElements, ArgMax (any axis, resolved)
  bool exclusive = false, reverse = false;    // CumSum: ONNX's flags
  bool lastIndex = false;                     // ArgMax: select_last_index
  int64_t k = 0;                              // TopK: how many of each row (>= 1)
  bool largest = true;                        // TopK: the largest (else the smallest), sorted
  std::vector<int64_t> shape;                 // Reshape (resolved; shape[0] = -1 = batch)
  std::vector<int> perm;                      // Transpose (any permutation)
  float epsilon = 1e-5f;                      // LayerNormalization (normalises axis.. end)
  float exponent = 1.0f;                      // Pow (constant scalar exponent)
  // ReduceMean/Sum/Max (sorted, all >= 1); Slice (any order, with starts/steps)
  std::vector<int64_t> axes;
  bool keepdims = true;                       // ReduceMean/Sum/Max
  float scale = 1.0f;                         // Attention (scores multiplier)
  // plan v2
  std::vector<int64_t> starts, steps;         // Slice (resolved: start in range, count from the output)
  DType to = DType::kFloat32;                 // Cast
  bool fmod = false;                          // Mod
  double value = 0, start = 0, delta = 1;     // ConstantOfShape value; Range start, delta
  // Clip bounds (an absent bound is unbounded); HardSigmoid uses alpha/beta (0.2, 0.5).
  float clipMin = -3.402823466e38f;
  float clipMax = 3.402823466e38f;
  // Pad: begins then ends for every dimension of the full rank (batch entries 0); may be < 0.
  std::vector<int64_t> padsNd;
  PadMode padMode = PadMode::kConstant;
  float padValue = 0.f;
  std::vector<int64_t> split;  // Split: sizes along `axis`, one per output
  // LSTM: gates iofc, activations sigmoid/tanh/tanh; layout 1 = batch-first tensors.
  int hiddenSize = 0;
  LstmDirection direction = LstmDirection::kForward;
  int layout = 1;
  bool linearBeforeReset = false;  // GRU: the reset gate scales h·Rh^T + Rbh (torch's nn.GRU)
};

inline constexpr int32_t kAbsentInput = -1;

struct Op {
  OpType type = OpType::kRelu;
  std::string name;
  std::vector<int32_t> inputs;   // tensor ids; kAbsentInput = absent (e.g. Conv bias)
  std::vector<int32_t> outputs;  // tensor ids
  OpAttrs attrs;
};

struct Plan {
  std::string producer;
  std::string source;
  std::vector<TensorInfo> tensors;  // index = tensor id
  std::vector<int32_t> inputs;      // graph inputs, ONNX order
  std::vector<int32_t> outputs;     // graph outputs, ONNX order
  std::vector<Op> ops;              // execution order
  uint64_t bytesPerSample = 0;      // arena bytes for one sample
  uint64_t lowerBoundPerSample = 0;
  uint64_t alignment = 64;
  // Some Concat inputs lie inside their Concat's output, at their slice of one sample
  // (docs/plan-format.md, "Concat in place"): the plan runs one sample at a time, or with those
  // inputs laid apart (concat_in_place.h).
  bool concatInPlace = false;
  // The weight blob inside the mapping.
  const uint8_t* blob = nullptr;
  uint64_t blobBytes = 0;
  // Sum of weight tensors' bytes (what a backend holds if it uploads them all).
  uint64_t weightBytes = 0;
  // Every non-weight tensor is [batch, ...] (k = 1 at axis 0): a batch may run in chunks of
  // samples. Otherwise a backend runs the whole batch with an arena of n x bytesPerSample.
  bool batchFirst = true;
  // Every tensor is float32 (what the v1-era backends compute on).
  bool allFloat = true;
};

// Owns the read-only mapping and the parsed Plan of every shape profile (opaque; move-only).
// A v2 plan has one profile; a v3 plan one or more, whose weights share one blob.
class PlanFile {
 public:
  virtual ~PlanFile() = default;
  virtual const Plan& plan() const = 0;  // profile 0
  virtual const std::vector<Plan>& profiles() const = 0;
  virtual const uint8_t* mapping() const = 0;  // start of the mapped file
  virtual uint64_t mapping_bytes() const = 0;
};

// mmap `path` read-only, validate in the doc's order, parse the header.
// On failure returns the Status and sets *message to a text naming the field, the
// expected and the found value; *out is left empty.
Status read_plan(const std::string& path, std::unique_ptr<PlanFile>* out, std::string* message);

// Same checks over bytes already in memory (tests, or a caller that mapped the file).
// Weight pointers point into [data, data + size); the caller keeps the bytes alive.
// parse_plan returns profile 0; parse_plan_profiles every profile.
Status parse_plan(const uint8_t* data, size_t size, Plan* out, std::string* message);
Status parse_plan_profiles(const uint8_t* data, size_t size, std::vector<Plan>* out, std::string* message);

// Weight bytes of all profiles, a weight that several profiles share (one blob offset) once.
uint64_t distinct_weight_bytes(const std::vector<Plan>& profiles);

}  // namespace memlane
