// The CUDA backend's interface beyond Backend: asynchronous submission, so a caller can
// overlap the host-to-device copy of request N+1 with the compute of request N
// ("overlap") and receive outputs without blocking the next launch ("asyncOutputs").
// make_cuda_backend() returns a CudaBackend; code built with MEMLANE_HAVE_CUDA may
// dynamic_cast a Backend* to it:
//
//   if (auto* cb = dynamic_cast<memlane::cuda::CudaBackend*>(backend.get())) {
//     for (...) cb->submit(batch, ins, outs, [](memlane::Status s, const std::string& m) {...}, &msg);
//     cb->drain(&msg);
//   }
//
// run() stays synchronous and may be called from several threads at once: each call takes
// a free execution context ("contexts" switch), so N threads run N requests concurrently
// against one copy of the weights.
#pragma once

#include <functional>
#include <string>

#include "backend.h"
#include "cuda_options.h"

namespace memlane::cuda {

using DoneFn = std::function<void(Status, const std::string&)>;

class CudaBackend : public Backend {
 public:
  // Enqueue one request and return once its inputs are staged (the caller may reuse the
  // input buffers). `outputs` must stay valid until `done` runs; `done` runs on a CUDA
  // host-callback thread (asyncOutputs) or before submit returns (asyncOutputs off) and
  // must not call CUDA. At most two requests per context are in flight; a third waits.
  virtual Status submit(int64_t batch, const float* const* inputs, float* const* outputs,
                        DoneFn done, std::string* message) = 0;
  // Wait for every submitted request.
  virtual Status drain(std::string* message) = 0;
  virtual const CudaOptions& options() const = 0;
  // What happened to the techniques at run time, e.g. "cudaGraph: batch 16 captured",
  // "releaseHostWeights: 44.6 MiB released" or why one fell back.
  virtual std::string notes() const = 0;
};

}  // namespace memlane::cuda
