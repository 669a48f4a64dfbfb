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

enum class DType : uint8_t { kFloat32 };
enum class TensorKind : uint8_t { kInput, kOutput, kActivation, kWeight };

struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  // Activations/inputs/outputs: shape[0] == -1 is the batch dimension.
  std::vector<int64_t> shape;
  TensorKind kind = TensorKind::kActivation;
  // Weight: byte offset from the blob start and total bytes.
  // Others: arena byte offset PER SAMPLE and bytes PER SAMPLE (scale by the batch n).
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Weight only: pointer into the read-only mapping (blob + offset). nullptr otherwise.
  const float* data = nullptr;

  bool is_weight() const { return kind == TensorKind::kWeight; }
  // Elements per sample (non-weights, shape[0] ignored) or total elements (weights).
  int64_t elements() const {
    int64_t n = 1;
    for (size_t i = is_weight() ? 0 : 1; i < shape.size(); ++i) n *= shape[i];
    return n;
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
};
const char* op_type_name(OpType t);

enum class Activation : uint8_t { kNone, kRelu };

// Typed attributes: one flat struct, each op reads the fields its row in the doc lists.
// The compiler resolved every ONNX default; the reader fills the rest with neutral values.
struct OpAttrs {
  // Conv, MaxPool, AveragePool (2-D only in v1).
  int kernel[2] = {1, 1};
  int strides[2] = {1, 1};
  int pads[4] = {0, 0, 0, 0};  // top, left, bottom, right
  int dilations[2] = {1, 1};
  int group = 1;                 // Conv
  bool ceilMode = false;         // pools
  bool countIncludePad = false;  // AveragePool
  // Gemm
  float alpha = 1.0f;  // Gemm alpha, LeakyRelu alpha (default 0.01 set by the reader)
  float beta = 1.0f;
  bool transA = false;
  bool transB = false;
  Activation activation = Activation::kNone;  // Conv, Gemm
  bool geluTanh = false;                      // Gelu approximate == "tanh"
  int axis = 1;                               // Flatten, Concat, Softmax (full rank, >= 1)
  std::vector<int64_t> shape;                 // Reshape (resolved; shape[0] = -1 = batch)
  std::vector<int> perm;                      // Transpose (perm[0] = 0)
  float epsilon = 1e-5f;                      // LayerNormalization (normalises axis.. end)
  float exponent = 1.0f;                      // Pow (constant scalar exponent)
  std::vector<int> axes;                      // ReduceMean/Sum/Max (sorted, all >= 1)
  bool keepdims = true;                       // ReduceMean/Sum/Max
  float scale = 1.0f;                         // Attention (scores multiplier)
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
  // The weight blob inside the mapping.
  const uint8_t* blob = nullptr;
  uint64_t blobBytes = 0;
  // Sum of weight tensors' bytes (what a backend holds if it uploads them all).
  uint64_t weightBytes = 0;
};

// Owns the read-only mapping and the parsed Plan (opaque; move-only).
class PlanFile {
 public:
  virtual ~PlanFile() = default;
  virtual const Plan& plan() const = 0;
  virtual const uint8_t* mapping() const = 0;  // start of the mapped file
  virtual uint64_t mapping_bytes() const = 0;
};

// mmap `path` read-only, validate in the doc's order, parse the header.
// On failure returns the Status and sets *message to a text naming the field, the
// expected and the found value; *out is left empty.
Status read_plan(const std::string& path, std::unique_ptr<PlanFile>* out, std::string* message);

// Same checks over bytes already in memory (tests, or a caller that mapped the file).
// Weight pointers point into [data, data + size); the caller keeps the bytes alive.
Status parse_plan(const uint8_t* data, size_t size, Plan* out, std::string* message);

}  // namespace memlane
