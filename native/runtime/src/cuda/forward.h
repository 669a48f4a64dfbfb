// One forward pass of a plan on the device: every op's launcher, in plan order, on one
// stream. Pointers: activations at arena + batch * (per-sample offset), halved where the
// fp16 arena is (arena_halves), weights from the shared device copy; float32 tensors are
// stored in the chosen precision, other dtypes as they are. enqueue() only launches (no allocation,
// no synchronisation), so it can be captured into a CUDA graph; validate() runs the same
// code without launching to reject unsupported ops at prepare.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backend.h"
#include "kernels.h"

namespace memlane::cuda {

struct ForwardEnv {
  const Plan* plan = nullptr;
  Prec prec = Prec::kF32;
  const std::vector<void*>* weights = nullptr;  // device pointer per tensor id (weights only)
  char* arena = nullptr;
  void* col = nullptr;  // im2col scratch
  int64_t colElems = 0;
  const CublasApi* blas = nullptr;
  cublasHandle_t blasHandle = nullptr;
  bool halfArena = false;  // arena_halves(plan, prec)
  int* err = nullptr;      // device word: the first op whose run-time indices were out of range (+1)
};

// Per-sample arena offsets are planned in bytes of each tensor's dtype. In the fp16 setting
// a plan whose activations are all float32 halves them (the arena too); one with int64/int32/
// bool activations keeps the planned bytes, float tensors using the first half of their place.
bool arena_halves(const Plan& plan, Prec p);

// Device pointer of tensor `id` for a batch of `batch` (the batch at any axis: n x offset).
void* tensor_ptr(const ForwardEnv& env, int32_t id, int64_t batch);

// im2col elements one sample needs at most over the plan's convs (0: none needs it).
int64_t max_col_elems_per_sample(const Plan& plan);

Status validate_plan(const Plan& plan, std::string* message);
// The fp16 setting's own refusal (fp16_checks.cc): integers carried through float32 tensors
// and cast back to an integer type (half is exact only up to 2048).
Status check_fp16_integers(const Plan& plan, std::string* message);
Status enqueue_forward(const ForwardEnv& env, int64_t batch, cudaStream_t s, std::string* message);

}  // namespace memlane::cuda
