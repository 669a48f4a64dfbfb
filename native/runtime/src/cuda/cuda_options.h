// The CUDA techniques, each a switch in BackendOptions::switches (from the infer.native /
// load task args; docs/gpu.md lists them). Parsed once; an error names the switch, what
// was expected and what was received.
#pragma once

#include <map>
#include <string>

#include "status.h"

namespace memlane::cuda {

struct CudaOptions {
  bool arenaOnce = true;        // "arena": "once" (default) | "per-request" (cudaMalloc each run)
  bool pinned = true;           // "pinned": page-locked host staging for inputs and outputs
  bool fp16 = false;            // "fp16": weights and activations in half, fp32 accumulation
  bool overlap = true;          // "overlap": H2D of request N+1 on a copy stream during N's compute
  bool asyncOutputs = true;     // "asyncOutputs": submit() returns before outputs land (host callback)
  bool cudaGraph = true;        // "cudaGraph": forward captured once per batch size, then replayed
  int contexts = 1;             // "contexts": execution contexts sharing one copy of the weights
  bool lazyLoading = true;      // "lazyLoading": CUDA_MODULE_LOADING=LAZY before the context exists
  bool lazyLoadingExplicit = false;
  bool releaseHostWeights = true;  // "releaseHostWeights": madvise(DONTNEED) the mapped weights
};

// Unknown keys are ignored (the switches map is shared with other backends).
Status parse_cuda_options(const std::map<std::string, std::string>& switches, CudaOptions* out,
                          std::string* message);

// "arena=once pinned=1 ..." for logs and results.
std::string describe(const CudaOptions& o);

}  // namespace memlane::cuda
