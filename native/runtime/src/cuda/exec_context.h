// One execution context: its own arena, streams, cuBLAS handle and workspace, staging
// buffers and CUDA graphs; the weights are shared with every other context. A request
// goes: host inputs -> (pinned staging) -> device input slot [copy stream] -> arena
// [compute stream] -> forward (graph or eager) -> outputs -> (pinned staging) -> host.
// Two slots double-buffer the device inputs and host staging so that request N+1's
// upload overlaps request N's compute.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "device_budget.h"
#include "forward.h"

namespace memlane::cuda {

struct SharedModel {
  const Plan* plan = nullptr;
  CudaOptions opt;
  Prec prec = Prec::kF32;
  std::vector<void*> weights;  // device pointer per tensor id
  const CublasApi* blas = nullptr;
  int64_t maxBatch = 0;
  // What each context allocates (device_budget.h): the arena and im2col scratch for maxBatch,
  // whether the arena halves, and an index error word for plans that gather at run time.
  DeviceBudget budget;
};

// Host bytes of tensor `id` for a batch (its dtype; float32 stays fp32 whatever the precision),
// and the 16-byte aligned part it takes in a staging buffer.
size_t host_bytes(const Plan& plan, int32_t id, int64_t batch);
inline size_t staged(size_t bytes) { return (bytes + 15) / 16 * 16; }

class ExecContext {
 public:
  explicit ExecContext(const SharedModel* m) : m_(m) {}
  ~ExecContext();
  Status init(std::string* message);  // allocates everything once (arena unless per-request)
  // `sync`: Backend::run (waits, returns its own failure only); false: Backend::submit,
  // which also returns an earlier asynchronous failure (take_pending) instead of running.
  Status submit(int64_t batch, const float* const* inputs, float* const* outputs, DoneFn done,
                bool sync, std::string* message);
  // Waits for this context's requests, then returns (and clears) the first failure of an
  // asynchronous one, as take_pending.
  Status drain(std::string* message);
  // The first failure of an asynchronous request (its DoneFn got it too, but the caller of
  // Runtime::submit_unchecked only learns of it here: runtime.h), cleared once returned.
  Status take_pending(std::string* message);
  std::mutex& mutex() { return mu_; }
  uint64_t device_bytes() const { return device_bytes_; }
  int slots() const { return nslots_; }  // requests this context can hold in flight
  std::string notes() const;

 private:
  struct Slot {
    // Staging, one 16-byte aligned part per tensor in the host dtype (float32 as fp32):
    char* devIn = nullptr;    // device inputs (null when copied straight to the arena)
    char* devOut = nullptr;   // device outputs (fp16 mode only)
    char* hostIn = nullptr;   // pinned staging
    char* hostOut = nullptr;
    int* errHost = nullptr;   // pinned copy of the context's error word after this request
    cudaEvent_t inReady = nullptr, inFree = nullptr, done = nullptr;
    // Completion state for the host callback (no allocation per request).
    ExecContext* self = nullptr;
    int64_t batch = 0;
    std::vector<float*> userOut;
    DoneFn doneFn;
  };
  static void CUDART_CB on_done(void* slot);
  Status forward(int64_t batch, char* arena, void* col, std::string* message);
  Status run_forward(int64_t batch, char* arena, void* col, std::string* message);
  // The request's status (an index out of range); records a failure of an asynchronous
  // request (`async`: from on_done, which has nobody to return it to) as pending.
  Status finish(Slot& s, bool async, std::string* message);
  Status alloc(void** p, size_t bytes, std::string* message);

  const SharedModel* m_;
  std::mutex mu_;
  // Guards the pending failure: set by on_done on a driver thread while a submit holding
  // mu_ may be waiting for that very callback, so it cannot be mu_.
  std::mutex pendingMu_;
  Status pending_ = Status::kOk;
  std::string pendingMessage_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blasWorkspace_ = nullptr;
  char* arena_ = nullptr;
  void* col_ = nullptr;
  int* err_ = nullptr;  // device error word of the index ops (data_kernels.h), reset as each submit starts
  Slot slots_[2];
  int next_ = 0;
  int nslots_ = 1;
  std::map<int64_t, cudaGraphExec_t> graphs_;
  std::map<int64_t, int> runsSeen_;
  std::vector<std::string> notes_;
  uint64_t device_bytes_ = 0;
  std::vector<void*> owned_;      // cudaMalloc'd
  std::vector<void*> ownedHost_;  // cudaMallocHost'd
};

}  // namespace memlane::cuda
