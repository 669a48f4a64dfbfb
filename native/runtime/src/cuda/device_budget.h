// What the CUDA backend allocates on the device for a plan, computed on the host from the
// plan and the options alone (no GPU needed). prepare() and ExecContext::init() allocate by
// these figures, and `memlane_cuda_bench PLAN --budget` prints them for the memory estimate
// (src/estimate/cuda-device.ts adds the calibrated context and per-context costs).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda_options.h"
#include "kernels.h"
#include "plan/plan.h"

namespace memlane::cuda {

// cuBLAS gets its workspace explicitly (cublasSetWorkspace): it must not allocate while a
// CUDA graph is being captured.
constexpr uint64_t kBlasWorkspaceBytes = 32ull << 20;
// The im2col scratch holds this many elements at most per context; a batch whose columns do
// not fit runs in chunks of samples.
constexpr int64_t kColBudgetElems = 32ll << 20;

struct DeviceBudget {
  bool halfArena = false;          // fp16 and every activation float32: the arena halves
  uint64_t weightBytes = 0;        // one buffer, each weight 256-byte aligned, in its device dtype
  uint64_t uploadStagingBytes = 0; // fp16: the largest float32 weight, freed after the upload
  // Per execution context (`contexts` of them):
  uint64_t blasWorkspaceBytes = kBlasWorkspaceBytes;
  uint64_t arenaBytes = 0;         // arena=once: held; per-request: allocated around each run
  int64_t colElems = 0;            // im2col scratch, in elements of the precision
  uint64_t colBytes = 0;           // held with the arena (arena=once) or around each run
  uint64_t inputStageBytes = 0;    // all inputs at maxBatch, each 16-byte aligned
  uint64_t outputStageBytes = 0;
  int deviceInputSlots = 0;        // device copies of the inputs (overlap or fp16)
  int deviceOutputSlots = 0;       // device copies of the outputs (fp16)
  uint64_t errorWordBytes = 0;     // plans with run-time indices: the op that read out of range

  // The device allocations one context holds after prepare, by name (what a reading adds up to).
  std::vector<std::pair<std::string, uint64_t>> context_allocations(const CudaOptions& o) const;
};

// Bytes a weight takes in the device buffer: its elements in their device dtype (float32 as
// half in fp16), 256-byte aligned. The upload walks its offsets by this; the budget sums it.
uint64_t weight_slot_bytes(const TensorInfo& t, Prec p);

// Unsupported plans are not refused here (validate_plan does that); the figures are what
// prepare() would allocate if the plan were accepted.
DeviceBudget device_budget(const Plan& plan, int64_t maxBatch, const CudaOptions& o);

// Input slots of a context: two when requests overlap or complete asynchronously, else one.
inline int context_slots(const CudaOptions& o) { return (o.overlap || o.asyncOutputs) ? 2 : 1; }

}  // namespace memlane::cuda
