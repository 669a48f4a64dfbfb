// The CUDA backend's interface beyond Backend: its parsed options. Asynchronous submission
// (Backend::submit/drain) is where its "overlap" (the host-to-device copy of request N+1
// during the compute of request N) and "asyncOutputs" (outputs handed back by a driver
// callback, not blocking the next launch) act:
//
//   for (...) backend->submit(batch, ins, outs, [](memlane::Status s, const std::string& m) {...}, &msg);
//   backend->drain(&msg);
//
// At most two requests per context are in flight (max_in_flight() = 2 x contexts); a
// further submit waits for its slot. run() stays synchronous and may be called from
// several threads at once: each call takes a free execution context ("contexts" switch),
// so N threads run N requests concurrently against one copy of the weights.
#pragma once

#include <string>

#include "backend.h"
#include "cuda_options.h"

namespace memlane::cuda {

class CudaBackend : public Backend {
 public:
  virtual const CudaOptions& options() const = 0;
};

}  // namespace memlane::cuda
