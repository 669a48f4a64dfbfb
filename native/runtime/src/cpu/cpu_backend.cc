// The CPU backend: compiles the plan's ops into kernels once, allocates one 64-byte
// aligned arena for maxBatch samples plus one shared scratch buffer, then runs with no
// allocation. Weights are read in place from the plan's read-only mapping.
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <thread>

#include "backend.h"
#include "cpu/kernel.h"

namespace memlane {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

void* aligned_bytes(uint64_t bytes) {
  const uint64_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded ? rounded : 64);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : opts_(o) {
    int t = o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency());
    threads_ = t < 1 ? 1 : t;
    pool_ = std::make_unique<cpu::ThreadPool>(threads_);
  }

  const char* name() const override { return "cpu"; }

  Status prepare(const Plan& plan, int64_t maxBatch, std::string* message) override {
    if (plan_) {
      *message = "prepare called twice";
      return Status::kInvalidArgument;
    }
    if (maxBatch < 1) {
      *message = "maxBatch: expected >= 1, found " + std::to_string(maxBatch);
      return Status::kInvalidArgument;
    }
    cpu::BuildCtx bc{&plan};
    std::vector<std::unique_ptr<cpu::Kernel>> kernels;
    uint64_t ws = 0;
    for (const Op& op : plan.ops) {
      Status st = Status::kOk;
      std::unique_ptr<cpu::Kernel> k;
      switch (op.type) {
        case OpType::kConv: k = cpu::make_conv(bc, op, &st, message); break;
        case OpType::kGemm: k = cpu::make_gemm(bc, op, &st, message); break;
        case OpType::kMatMul: k = cpu::make_matmul(bc, op, &st, message); break;
        case OpType::kAdd: case OpType::kSub: case OpType::kMul: case OpType::kDiv:
          k = cpu::make_binary(bc, op, &st, message); break;
        case OpType::kRelu: case OpType::kLeakyRelu: case OpType::kSigmoid: case OpType::kTanh:
        case OpType::kErf: case OpType::kGelu:
          k = cpu::make_unary(bc, op, &st, message); break;
        case OpType::kMaxPool: case OpType::kAveragePool: k = cpu::make_pool(bc, op, &st, message); break;
        case OpType::kGlobalAveragePool: k = cpu::make_global_avg_pool(bc, op, &st, message); break;
        case OpType::kFlatten: case OpType::kReshape: k = cpu::make_copy(bc, op, &st, message); break;
        case OpType::kTranspose: k = cpu::make_transpose(bc, op, &st, message); break;
        case OpType::kConcat: k = cpu::make_concat(bc, op, &st, message); break;
        case OpType::kSoftmax: k = cpu::make_softmax(bc, op, &st, message); break;
      }
      if (!k) return st == Status::kOk ? Status::kUnsupportedOp : st;
      ws = std::max(ws, k->workspace_floats(maxBatch));
      kernels.push_back(std::move(k));
    }
    // Refuse an arena the machine cannot hold (or whose size overflows) up front, instead of
    // an overcommitted allocation that the first run would fault in until the OOM killer.
    uint64_t arena_bytes = 0;
    const uint64_t phys = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    if (__builtin_mul_overflow(uint64_t(maxBatch), plan.bytesPerSample, &arena_bytes) || arena_bytes > phys ||
        ws > phys / sizeof(float)) {
      *message = "arena of maxBatch " + std::to_string(maxBatch) + " x " + std::to_string(plan.bytesPerSample) +
                 " bytes per sample (and workspace of " + std::to_string(ws) + " floats) exceeds physical memory (" +
                 std::to_string(phys) + " bytes)";
      return Status::kOutOfMemory;
    }
    arena_.reset(static_cast<uint8_t*>(aligned_bytes(arena_bytes)));
    workspace_.reset(ws ? static_cast<float*>(aligned_bytes(ws * sizeof(float))) : nullptr);
    if (!arena_ || (ws && !workspace_)) {
      *message = "arena of " + std::to_string(arena_bytes) + " bytes and workspace of " +
                 std::to_string(ws * 4) + " bytes could not be allocated";
      return Status::kOutOfMemory;
    }
    for (uint32_t id : plan.inputs) in_.push_back(&plan.tensors[id]);
    for (uint32_t id : plan.outputs) out_.push_back(&plan.tensors[id]);
    kernels_ = std::move(kernels);
    stats_.arenaBytes = arena_bytes;
    stats_.workspaceBytes = ws * sizeof(float);
    stats_.weightBytesMapped = plan.weightBytes;
    maxBatch_ = maxBatch;
    plan_ = &plan;
    openblas_set_num_threads(threads_);
    // MEMLANE_PROFILE=1: time every op and print the mean per op at destruction (tuning aid).
    if (const char* p = std::getenv("MEMLANE_PROFILE"); p && *p == '1') {
      profile_.assign(kernels_.size(), 0.0);
      profile_min_.assign(kernels_.size(), 0.0);
    }
    return Status::kOk;
  }

  Status run(int64_t batch, const float* const* inputs, float* const* outputs, std::string* message) override {
    if (!plan_) {
      *message = "no plan prepared";
      return Status::kNotLoaded;
    }
    if (batch < 1 || batch > maxBatch_) {
      *message = "batch: expected 1.." + std::to_string(maxBatch_) + ", found " + std::to_string(batch);
      return Status::kInvalidArgument;
    }
    cpu::RunCtx c{batch, arena_.get(), workspace_.get(), pool_.get()};
    for (size_t i = 0; i < in_.size(); ++i)
      std::memcpy(arena_.get() + uint64_t(batch) * in_[i]->offset, inputs[i], uint64_t(batch) * in_[i]->bytes);
    if (profile_.empty()) {
      for (const auto& k : kernels_) k->run(c);
    } else {
      for (size_t i = 0; i < kernels_.size(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        kernels_[i]->run(c);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        profile_[i] += us;
        profile_min_[i] = profiled_runs_ ? std::min(profile_min_[i], us) : us;
      }
      ++profiled_runs_;
    }
    for (size_t i = 0; i < out_.size(); ++i)
      std::memcpy(outputs[i], arena_.get() + uint64_t(batch) * out_[i]->offset, uint64_t(batch) * out_[i]->bytes);
    return Status::kOk;
  }

  MemoryStats memory_stats() const override { return stats_; }

  ~CpuBackend() override {
    if (profile_.empty() || !profiled_runs_) return;
    for (size_t i = 0; i < profile_.size(); ++i)
      std::fprintf(stderr, "[memlane profile] %3zu %-18s %-40s mean %10.2f us  min %10.2f us\n", i,
                   op_type_name(plan_->ops[i].type), plan_->ops[i].name.c_str(), profile_[i] / double(profiled_runs_),
                   profile_min_[i]);
  }

 private:
  BackendOptions opts_;
  int threads_ = 1;
  std::unique_ptr<cpu::ThreadPool> pool_;
  const Plan* plan_ = nullptr;
  int64_t maxBatch_ = 0;
  std::vector<std::unique_ptr<cpu::Kernel>> kernels_;
  std::vector<const TensorInfo*> in_, out_;
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  std::unique_ptr<float, FreeDeleter> workspace_;
  MemoryStats stats_;
  std::vector<double> profile_;  // per-op microseconds summed over runs (MEMLANE_PROFILE=1)
  std::vector<double> profile_min_;
  uint64_t profiled_runs_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, Status* status, std::string* message) {
  if (options.threads < 0) {
    *status = Status::kInvalidArgument;
    *message = "threads: expected >= 0, found " + std::to_string(options.threads);
    return nullptr;
  }
  *status = Status::kOk;
  return std::make_unique<CpuBackend>(options);
}

}  // namespace memlane
