// The plan v2 data ops on the device (ops/data_*.cu, ops/gather.cu): int64/int32/bool tensors
// and float tensors in their storage precision, with plain pointer interfaces like kernels.h.
// Every launcher only enqueues (no allocation, no synchronisation: CUDA graph capture).
// Ops that only move elements (Where, Expand, Slice, Gather, GatherND, GatherElements, Concat) take the
// element size in bytes; ops that compute take the storage type (Elem).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memlane::cuda {

// Storage of one element: float32 tensors are kF16 in the fp16 setting; bool is one byte.
enum class Elem : uint8_t { kF32, kF16, kI64, kI32, kU8 };
inline int elem_bytes(Elem e) {
  return e == Elem::kI64 ? 8 : (e == Elem::kF32 || e == Elem::kI32) ? 4 : e == Elem::kF16 ? 2 : 1;
}

// The CPU backend's broadcasting rank limit (cpu/broadcast.h), for every data op here.
inline constexpr int kMaxDataRank = 8;

// numpy broadcasting of up to 3 inputs to the output's dims (right-aligned by the caller;
// an element stride of 0 marks a broadcast dimension).
struct DataBroadcast {
  int rank = 0;
  int64_t out_dims[kMaxDataRank] = {};
  int64_t strides[3][kMaxDataRank] = {};
};

// ops/data_binary.cu. Arithmetic keeps the inputs' type; comparisons, And, Or give bool.
// Integer Div/Mod by 0 (and by -1) give 0 / -a / 0 as the CPU backend's; float Mod is fmod.
// PRelu: a where a >= 0, a * b below.
enum class DataBinaryKind : uint8_t {
  kAdd, kSub, kMul, kDiv, kMod, kFmod, kMax, kMin, kPRelu,
  kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr,
};
cudaError_t data_binary(DataBinaryKind k, Elem in, const void* a, const void* b, void* y, const DataBroadcast& d,
                        cudaStream_t s);

// ops/data_elementwise.cu.
// Where: y = cond ? x : z (strides[0] cond, [1] x, [2] z).
cudaError_t where(int esize, const void* cond, const void* x, const void* z, void* y, const DataBroadcast& d,
                  cudaStream_t s);
// Expand: y = x broadcast (strides[0]).
cudaError_t expand(int esize, const void* x, void* y, const DataBroadcast& d, cudaStream_t s);
// Cast between any two storage types (to bool: any non-zero; float to int truncates); Not on bool.
cudaError_t cast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t s);
cudaError_t logical_not(const void* x, void* y, int64_t n, cudaStream_t s);
// Range (y[i] = start + i * delta) or ConstantOfShape (y[i] = value), computed in double.
cudaError_t fill(Elem t, bool range, double value, double start, double delta, void* y, int64_t n, cudaStream_t s);

// ops/slice.cu: y[o] = x[sum_i (start[i] + o_i * step[i]) * in_stride[i]] over y's dims.
struct SliceDesc {
  int rank = 0;
  int64_t out_dims[kMaxDataRank] = {};
  int64_t in_stride[kMaxDataRank] = {};
  int64_t start[kMaxDataRank] = {};
  int64_t step[kMaxDataRank] = {};
};
cudaError_t slice(int esize, const void* x, void* y, const SliceDesc& d, cudaStream_t s);

// ops/gather.cu. Indices int64 (idx64) or int32, negative ones count from the end. An index
// out of range writes zeros to its row and records `tag` in *err (the first one wins), which
// the execution context turns into the request's INVALID_ARGUMENT (cpu: KernelError).
// Gather: data [outer, len, inner] -> y [outer, nidx, inner].
struct GatherDesc {
  int64_t outer = 0, len = 0, inner = 0, nidx = 0;
};
cudaError_t gather(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherDesc& d, int* err,
                   int tag, cudaStream_t s);
// GatherND (batch_dims 0): `tuples` index tuples of r entries, each a slice of `slice` elements
// at sum_j k_j * stride[j] of the data (dims[j]: the data's first r dims).
struct GatherNDDesc {
  int r = 0;
  int64_t dims[kMaxDataRank] = {};
  int64_t stride[kMaxDataRank] = {};
  int64_t tuples = 0, slice = 0;
};
cudaError_t gather_nd(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherNDDesc& d, int* err,
                      int tag, cudaStream_t s);
// ops/gather_elements.cu: y (the indices' dims) [p] = data[p with coordinate `axis` = idx[p]],
// the data's element strides given (every dim but `axis` of y at most the data's).
struct GatherElementsDesc {
  int rank = 0, axis = 0;
  int64_t out_dims[kMaxDataRank] = {};
  int64_t data_stride[kMaxDataRank] = {};
  int64_t len = 0;  // the data's dim on `axis`
};
cudaError_t gather_elements(int esize, bool idx64, const void* data, const void* idx, void* y, const GatherElementsDesc& d,
                            int* err, int tag, cudaStream_t s);

// ops/cumsum.cu: x [outer, len, inner] summed along len (cpu/cumsum.cc: in order, floats in
// float, half accumulated in float, integers wrapping).
struct CumSumDesc {
  int64_t outer = 0, len = 0, inner = 0;
  bool exclusive = false, reverse = false;
};
cudaError_t cumsum(Elem t, const void* x, void* y, const CumSumDesc& d, cudaStream_t s);

// ops/concat.cu: copy x [outer, xdim * inner] into y [outer, ydim * inner] at column offset
// `at * inner` (one call per input), elements of any size (float in its precision, int64, bool).
cudaError_t concat_part_bytes(int esize, const void* x, void* y, int64_t outer, int64_t xdim, int64_t ydim, int64_t at,
                              int64_t inner, cudaStream_t s);
// ops/split.cu: Concat's weight input w [rows_per_sample, wdim * inner] repeated for every
// sample into y's columns at `at`.
cudaError_t concat_repeat_part_bytes(int esize, const void* w, void* y, int64_t outer, int64_t rows_per_sample,
                                     int64_t wdim, int64_t ydim, int64_t at, int64_t inner, cudaStream_t s);

}  // namespace memlane::cuda
