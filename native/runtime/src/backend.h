// The interface every compute backend implements (src/cpu/, src/cuda/).
//
// Life cycle: make_*_backend(options) -> prepare(plan, maxBatch) once (weights are taken
// from the mapped plan and the arena is allocated once, for maxBatch or a chunk of it) -> run(batch, ...)
// any number of times with no allocation -> destroy. The PlanFile must outlive the
// backend: the CPU backend computes straight from the mapped weights.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cache_line_alloc.h"
#include "memlane/runtime.h"
#include "plan/plan.h"
#include "status.h"

namespace memlane {

namespace cpu {
class ThreadPool;
namespace simd {
class PanelCache;
}
}

// Host memory that the backends of one Runtime share because they never run at once: one
// backend per shape profile of a plan (docs/plan-format.md, "Profiles"). Each backend grows a
// slot to its need in prepare() and takes its address at every run, so a plan of three
// profiles holds its largest arena, not the sum of the three. Contents are not kept.
class SharedHostBuffers {
 public:
  enum Slot { kArena = 0, kWorkspace = 1 };
  SharedHostBuffers() = default;
  SharedHostBuffers(const SharedHostBuffers&) = delete;
  SharedHostBuffers& operator=(const SharedHostBuffers&) = delete;
  ~SharedHostBuffers() {
    for (auto& b : slots_) std::free(b.data);
  }
  // At least `bytes` (64-byte aligned) in `slot`; false when the allocation failed.
  bool reserve(Slot slot, uint64_t bytes) {
    Buf& b = slots_[slot];
    if (b.data && b.bytes >= bytes) return true;
    void* p = alloc_cache_lines(bytes);
    if (!p) return false;
    std::free(b.data);
    b.data = static_cast<uint8_t*>(p);
    b.bytes = cache_line_bytes(bytes);
    return true;
  }
  uint8_t* data(Slot slot) const { return slots_[slot].data; }
  uint64_t bytes(Slot slot) const { return slots_[slot].bytes; }
  // The CPU backends' intra-op thread pool, made by the first one (one set of threads, not one a profile).
  std::shared_ptr<cpu::ThreadPool> cpuPool;
  // The CPU backends' packed dense-layer weights (cpu/simd/gemm_panels.h), likewise one set.
  std::shared_ptr<cpu::simd::PanelCache> cpuPanels;

 private:
  struct Buf {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;
  };
  Buf slots_[2];
};

struct BackendOptions {
  // Intra-op threads (BLAS and the backend's own parallel loops); 0 = library default.
  int threads = 0;
  // CUDA device ordinal (ignored by the CPU backend).
  int deviceIndex = 0;
  // Backend-specific switches passed through from the task args (e.g. the CUDA
  // variant: "cudaGraph" -> "true", "fp16" -> "true"). Unknown keys are ignored.
  std::map<std::string, std::string> switches;
  // Optional: a backend reports its own sub-phases (GPU: "cuda-context",
  // "weights-upload", "arena"; names from include/memlane/protocol.h) with start=true
  // before and start=false after. The runtime turns them into protocol phase marks.
  std::function<void(const char* phase, bool start)> phaseMark;
  // Set by a Runtime that prepares one backend per shape profile: the CPU backend then takes
  // its arena and workspace from here instead of allocating its own. nullptr: its own.
  std::shared_ptr<SharedHostBuffers> sharedHost;
  // CPU: time a conv's candidate kernels at prepare and keep the fastest (cpu/conv_tune.h).
  // Off by default: two processes can break a near tie differently, and their outputs then
  // differ by the paths' rounding (a pipeline's two native runs were not byte-identical).
  // MEMLANE_CONV_TUNE=1 / =0 overrides this either way.
  bool tuneConvs = false;
};

// Completion of an asynchronously submitted request (Backend::submit): its outputs are written.
using DoneFn = std::function<void(Status, const std::string&)>;

struct MemoryStats {
  uint64_t arenaBytes = 0;         // activation arena (host for cpu, device for cuda)
  uint64_t weightBytesHost = 0;    // weight bytes the backend holds in host memory it owns
                                   // (0 for cpu: it reads the read-only mapping)
  uint64_t weightBytesMapped = 0;  // weight bytes read from the file mapping
  uint64_t weightBytesReleased = 0;  // of those, bytes whose plan pages were given back after the
                                     // kernels repacked them (cpu: weight_release.h)
  uint64_t weightBytesDevice = 0;  // weight bytes held on the device
  uint64_t workspaceBytes = 0;     // scratch besides the arena (im2col, cuBLAS workspace)
  uint64_t batchTailBytesPerSample = 0;  // cpu: arena per sample of the ops run over the whole
                                         // batch where one is split into chunks (cpu/batch_tail.h;
                                         // in arenaBytes x maxBatch only then); 0: none
  uint64_t arenaUnwrittenBytesPerSample = 0;  // cpu: of bytesPerSample, what no kernel writes
                                              // (cpu/arena_unwritten.h)
  uint64_t batchTailUnwrittenBytesPerSample = 0;     // cpu: the same of the batch tail's arena
  std::vector<uint64_t> batchTailWorkspaceBytesByBatch;  // cpu: workspaceBytesByBatch of the
                                                         // batch tail's kernels alone; empty: none
  std::vector<uint64_t> workspaceBytesByBatch;  // cpu: RuntimeMemory's (the largest kernel
                                                // workspace for 2^i samples at once); empty: none
  int64_t deviceUsedBytes = -1;    // this process's device memory, -1 = unknown/unavailable
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual const char* name() const = 0;

  // Take weights from the plan and allocate the arena and any scratch once. Called once. The
  // arena holds at most maxBatch * plan.bytesPerSample; the CPU backend runs a batch in chunks
  // of a few samples (cpu_backend.cc) and allocates only chunk (x lanes) * bytesPerSample.
  // Returns kUnsupportedOp naming the op when the plan holds one this backend lacks.
  virtual Status prepare(const Plan& plan, int64_t maxBatch, std::string* message) = 0;

  // Run `batch` (1..maxBatch) samples. inputs[i] holds batch * plan.tensors[plan.inputs[i]]
  // .elements() elements of the tensor's dtype in the plan's layout (the batch at its axis;
  // C-contiguous, host memory, 8-byte aligned; typed float* from plan v1, cast for other
  // dtypes); outputs[i] receives batch * plan.tensors[plan.outputs[i]].elements() elements.
  // A run-time data error (an index out of range) returns kInvalidArgument naming it. Shape and NaN checks are the
  // caller's (src/runtime.cc); a backend may assume valid, finite inputs.
  // Must not allocate (tests count allocations through a hook).
  virtual Status run(int64_t batch, const float* const* inputs, float* const* outputs,
                     std::string* message) = 0;

  virtual MemoryStats memory_stats() const = 0;

  // Asynchronous submission, so a caller keeps several requests in flight: returns once the
  // inputs are consumed (the caller may reuse them); `outputs` must stay valid until `done`
  // runs, which happens only when submit returned kOk. A failure of an in-flight request
  // surfaces from a later submit() or from drain(). `done` may run on another thread (the
  // CUDA backend: a driver callback thread) and must not call into the backend.
  // The default is synchronous: run(), then `done` before returning (the CPU backend
  // computes on the caller's thread, so there is nothing to overlap).
  virtual Status submit(int64_t batch, const float* const* inputs, float* const* outputs, DoneFn done,
                        std::string* message) {
    const Status s = run(batch, inputs, outputs, message);
    if (s == Status::kOk && done) done(s, std::string());
    return s;
  }
  // Waits for every submitted request.
  virtual Status drain(std::string* /*message*/) { return Status::kOk; }
  // How many submitted requests may be in flight at once (each needs its own output
  // buffers); 1 for a synchronous backend.
  virtual int max_in_flight() const { return 1; }
  // What the backend did with its options at run time, e.g. "cudaGraph: batch 16 captured"
  // or why a technique fell back; empty when there is nothing to say.
  virtual std::string notes() const { return std::string(); }
  // Per-op timing (Runtime::set_profiling): false when the backend cannot time its ops.
  virtual bool set_profiling(bool /*on*/) { return false; }
  virtual OpProfile op_profile() const { return OpProfile(); }
};

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, Status* status,
                                          std::string* message);

// Built only when MEMLANE_WITH_CUDA (CMake target memlane_cuda, defines MEMLANE_HAVE_CUDA
// for code linking it). Returns nullptr with kBackendUnavailable when no device is present
// or the driver is missing, so `--device auto` can fall back to the CPU backend.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options, Status* status,
                                           std::string* message);

}  // namespace memlane
