// make_cuda_backend and the CudaBackend: context creation (lazy module loading set first),
// weights uploaded once from the mapped plan then their host pages released, and N
// execution contexts sharing those weights (exec_context.h).
#include "cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <memory>
#include <vector>

#include "cuda_check.h"
#include "device_budget.h"
#include "device_memory.h"
#include "exec_context.h"
#include "forward_util.h"
#include "core/host_pages.h"
#include "plan/concat_in_place.h"

namespace memlane {
namespace cuda {
namespace {

struct PhaseScope {
  const BackendOptions& o;
  const char* name;
  PhaseScope(const BackendOptions& opts, const char* n) : o(opts), name(n) { if (o.phaseMark) o.phaseMark(name, true); }
  ~PhaseScope() { if (o.phaseMark) o.phaseMark(name, false); }
};

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(const BackendOptions& bo, const CudaOptions& o, const CublasApi* blas)
      : bo_(bo), device_(bo.deviceIndex) {
    model_.opt = o;
    model_.prec = o.fp16 ? Prec::kF16 : Prec::kF32;
    model_.blas = blas;
  }
  ~CudaBackendImpl() override {
    contexts_.clear();  // before the weights they read
    if (weights_) cudaFree(weights_);
  }

  const char* name() const override { return "cuda"; }
  const CudaOptions& options() const override { return model_.opt; }

  Status prepare(const Plan& given, int64_t maxBatch, std::string* message) override {
    if (model_.plan) return *message = "cuda backend: prepare called twice", Status::kInvalidArgument;
    // Whole batches run at once here: Concat inputs laid in place (one sample's slice) get
    // places of their own again, and the Concats copy (plan/concat_in_place.h).
    if (given.concatInPlace) apart_ = std::make_unique<Plan>(concat_inputs_apart(given));
    const Plan& plan = apart_ ? *apart_ : given;
    if (maxBatch < 1) return *message = "maxBatch: expected >= 1, received " + std::to_string(maxBatch), Status::kInvalidArgument;
    MEMLANE_TRY(validate_plan(plan, message));
    if (model_.prec == Prec::kF16) MEMLANE_TRY(check_fp16_integers(plan, message));
    CUDA_CHECK(cudaSetDevice(device_));
    model_.plan = &plan;
    model_.maxBatch = maxBatch;
    // Every size allocated below comes from the budget (device_budget.h), the one definition
    // the memory estimate reads too.
    model_.budget = device_budget(plan, maxBatch, model_.opt);
    {
      PhaseScope phase(bo_, "weights-upload");
      MEMLANE_TRY(upload_weights(plan, message));
    }
    {
      PhaseScope phase(bo_, "arena");
      for (int i = 0; i < model_.opt.contexts; ++i) {
        contexts_.push_back(std::make_unique<ExecContext>(&model_));
        MEMLANE_TRY(contexts_.back()->init(message));
      }
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    return Status::kOk;
  }

  Status run(int64_t batch, const float* const* inputs, float* const* outputs, std::string* message) override {
    MEMLANE_TRY(check_batch(batch, message));
    // A free context if there is one (concurrent callers), else wait for the next in turn.
    const size_t n = contexts_.size();
    const size_t start = rr_.fetch_add(1) % n;
    for (size_t k = 0; k < n; ++k) {
      ExecContext& c = *contexts_[(start + k) % n];
      std::unique_lock<std::mutex> lock(c.mutex(), std::try_to_lock);
      if (lock.owns_lock()) return c.submit(batch, inputs, outputs, nullptr, true, message);
    }
    ExecContext& c = *contexts_[start];
    std::lock_guard<std::mutex> lock(c.mutex());
    return c.submit(batch, inputs, outputs, nullptr, true, message);
  }

  Status submit(int64_t batch, const float* const* inputs, float* const* outputs, DoneFn done,
                std::string* message) override {
    MEMLANE_TRY(check_batch(batch, message));
    // A failed in-flight request of any context is returned by the next submit, whichever
    // context that one would use (runtime.h); this request then does not run.
    for (auto& c : contexts_) MEMLANE_TRY(c->take_pending(message));
    ExecContext& c = *contexts_[rr_.fetch_add(1) % contexts_.size()];
    std::lock_guard<std::mutex> lock(c.mutex());
    return c.submit(batch, inputs, outputs, std::move(done), false, message);
  }

  // Waits for every context, even after one reported a failure; returns the first.
  Status drain(std::string* message) override {
    Status first = Status::kOk;
    for (auto& c : contexts_) {
      std::lock_guard<std::mutex> lock(c->mutex());
      std::string why;
      const Status st = c->drain(&why);
      if (st != Status::kOk && first == Status::kOk) {
        first = st;
        *message = why;
      }
    }
    return first;
  }

  int max_in_flight() const override {
    int n = 0;
    for (const auto& c : contexts_) n += c->slots();
    return n > 0 ? n : 1;
  }

  MemoryStats memory_stats() const override {
    MemoryStats m;
    uint64_t ctxBytes = 0;
    for (const auto& c : contexts_) ctxBytes += c->device_bytes();
    const uint64_t arena = model_.budget.arenaBytes;
    const uint64_t arenas = model_.opt.arenaOnce ? arena * contexts_.size() : 0;
    m.arenaBytes = model_.opt.arenaOnce ? arenas : arena;  // per-request: per run
    m.weightBytesHost = 0;
    m.weightBytesMapped = model_.plan ? model_.plan->weightBytes : 0;
    m.weightBytesDevice = weightBytesDevice_;
    m.workspaceBytes = ctxBytes > arenas ? ctxBytes - arenas : 0;
    m.deviceUsedBytes = read_device_memory(device_).usedBytes;
    return m;
  }

  std::string notes() const override {
    std::string out = describe(model_.opt) + "; " + releaseNote_;
    for (const auto& c : contexts_) {
      std::string n = c->notes();
      if (!n.empty()) out += "; " + n;
    }
    const DeviceMemoryReading r = read_device_memory(device_);
    out += r.perProcess ? "; device memory: per process (NVML)" : "; device memory: device-wide (cudaMemGetInfo)";
    return out;
  }

 private:
  Status check_batch(int64_t batch, std::string* message) const {
    if (contexts_.empty()) return *message = "cuda backend: run before prepare", Status::kNotLoaded;
    if (batch < 1 || batch > model_.maxBatch) {
      *message = "batch: expected 1.." + std::to_string(model_.maxBatch) + ", received " + std::to_string(batch);
      return Status::kInvalidArgument;
    }
    return Status::kOk;
  }

  // One device buffer for every weight (256-byte aligned each), copied straight from the
  // mapping (fp16: float32 weights through an fp32 staging buffer and a cast), then the
  // mapping's pages are released so that steady host RSS holds no weights.
  Status upload_weights(const Plan& plan, std::string* message) {
    model_.weights.assign(plan.tensors.size(), nullptr);
    const uint64_t total = model_.budget.weightBytes, largest = model_.budget.uploadStagingBytes;
    if (total == 0) return Status::kOk;
    CUDA_CHECK(cudaMalloc(&weights_, total));
    weightBytesDevice_ = total;
    float* staging = nullptr;
    if (largest) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&staging), largest));
    uint64_t off = 0;
    Status st = Status::kOk;
    for (size_t id = 0; id < plan.tensors.size() && st == Status::kOk; ++id) {
      const TensorInfo& t = plan.tensors[id];
      if (!t.is_weight()) continue;
      char* dst = static_cast<char*>(weights_) + off;
      model_.weights[id] = dst;
      const size_t n = static_cast<size_t>(t.elements());
      off += weight_slot_bytes(t, model_.prec);
      if (n == 0) continue;
      if (t.dtype != DType::kFloat32) {
        if (!t.raw) continue;
        cudaError_t e = cudaMemcpy(dst, t.raw, n * dtype_size(t.dtype), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
          *message = cuda_error_text("cudaMemcpy(weight)", e, __FILE__, __LINE__);
          st = status_of(e);
        }
        continue;
      }
      if (!t.data) continue;
      st = copy_weight(dst, t.data, n, staging, message);
    }
    if (staging) cudaFree(staging);
    MEMLANE_TRY(st);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (!model_.opt.releaseHostWeights) {
      releaseNote_ = "releaseHostWeights: off";
    } else {
      ReleaseResult r = release_host_pages(plan.blob, plan.blobBytes);
      releaseNote_ = r.released ? "releaseHostWeights: " + std::to_string(r.bytes >> 10) + " KiB advised DONTNEED"
                                : "releaseHostWeights: not released (" + r.reason + ")";
    }
    return Status::kOk;
  }

  Status copy_weight(char* dst, const float* src, size_t n, float* staging, std::string* message) {
    if (model_.prec == Prec::kF32) {
      CUDA_CHECK(cudaMemcpy(dst, src, n * 4, cudaMemcpyHostToDevice));
      return Status::kOk;
    }
    CUDA_CHECK(cudaMemcpy(staging, src, n * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cast_f32_to_f16(staging, dst, static_cast<int64_t>(n), nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());  // staging is reused by the next weight
    return Status::kOk;
  }

  BackendOptions bo_;
  int device_;
  SharedModel model_;
  std::unique_ptr<Plan> apart_;  // the plan with its Concat inputs laid apart, where it laid them in place
  void* weights_ = nullptr;
  uint64_t weightBytesDevice_ = 0;
  std::string releaseNote_;
  std::vector<std::unique_ptr<ExecContext>> contexts_;
  std::atomic<size_t> rr_{0};
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options, Status* status, std::string* message) {
  std::string local;
  if (!message) message = &local;
  cuda::CudaOptions opt;
  *status = cuda::parse_cuda_options(options.switches, &opt, message);
  if (*status != Status::kOk) return nullptr;
  // Read when the driver initialises: must precede the first CUDA call of the process. An
  // explicit switch wins over the environment; otherwise the environment's choice stands.
  setenv("CUDA_MODULE_LOADING", opt.lazyLoading ? "LAZY" : "EAGER", opt.lazyLoadingExplicit ? 1 : 0);

  // cudaGetDeviceCount initialises the driver (cuInit); that cost lands in the enclosing
  // phase (runtime-create). The cuda-context phase wraps the context creation proper, and
  // is only marked when a device is usable, so a CPU fallback shows no CUDA phase.
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *status = Status::kBackendUnavailable;
    *message = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"
                                : std::string("no CUDA device: cudaGetDeviceCount found 0");
    // cudart says "driver version is insufficient" also when there is no driver at all.
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
      void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
      if (!libcuda) libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      if (!libcuda) *message = "no CUDA driver: libcuda.so.1 not found (" + *message + ")";
      else dlclose(libcuda);
    }
    cudaGetLastError();
    return nullptr;
  }
  if (options.deviceIndex < 0 || options.deviceIndex >= count) {
    *status = Status::kBackendUnavailable;
    *message = "deviceIndex: expected 0.." + std::to_string(count - 1) + ", received " + std::to_string(options.deviceIndex);
    return nullptr;
  }
  std::string why;
  const cuda::CublasApi* blas = cuda::load_cublas(&why);
  if (!blas) {
    *status = Status::kBackendUnavailable;
    *message = why;
    return nullptr;
  }
  cuda::PhaseScope phase(options, "cuda-context");
  e = cudaSetDevice(options.deviceIndex);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the primary context now, inside the phase
  if (e != cudaSuccess) {
    *status = Status::kBackendUnavailable;
    *message = std::string("CUDA context creation failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return nullptr;
  }
  *status = Status::kOk;
  return std::make_unique<cuda::CudaBackendImpl>(options, opt, blas);
}

}  // namespace memlane
