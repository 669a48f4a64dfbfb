#include "exec_context.h"

#include <cstring>

#include "cuda_check.h"
#include "forward_util.h"

namespace memlane::cuda {
size_t host_bytes(const Plan& plan, int32_t id, int64_t batch) {
  const TensorInfo& t = plan.tensors[id];
  return static_cast<size_t>(batch * t.elements()) * dtype_size(t.dtype);
}

ExecContext::~ExecContext() {
  if (compute_) cudaStreamSynchronize(compute_);
  if (copy_ && copy_ != compute_) cudaStreamSynchronize(copy_);
  for (auto& [b, g] : graphs_) if (g) cudaGraphExecDestroy(g);
  for (Slot& s : slots_) {
    if (s.inReady) cudaEventDestroy(s.inReady);
    if (s.inFree) cudaEventDestroy(s.inFree);
    if (s.done) cudaEventDestroy(s.done);
  }
  if (blas_ && m_->blas) m_->blas->destroy(blas_);
  if (copy_ && copy_ != compute_) cudaStreamDestroy(copy_);
  if (compute_) cudaStreamDestroy(compute_);
  for (void* p : owned_) cudaFree(p);
  for (void* p : ownedHost_) cudaFreeHost(p);
}

Status ExecContext::alloc(void** p, size_t bytes, std::string* message) {
  *p = nullptr;
  if (bytes == 0) return Status::kOk;
  CUDA_CHECK(cudaMalloc(p, bytes));
  owned_.push_back(*p);
  device_bytes_ += bytes;
  return Status::kOk;
}

Status ExecContext::init(std::string* message) {
  const CudaOptions& o = m_->opt;
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  if (o.overlap) CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  else copy_ = compute_;
  CUBLAS_CHECK(m_->blas->create(&blas_));
  CUBLAS_CHECK(m_->blas->set_stream(blas_, compute_));  // resets the workspace: set it after
  CUBLAS_CHECK(m_->blas->set_math_mode(blas_, CUBLAS_DEFAULT_MATH));  // no TF32: fp32 stays fp32
  const DeviceBudget& budget = m_->budget;
  MEMLANE_TRY(alloc(&blasWorkspace_, budget.blasWorkspaceBytes, message));
  CUBLAS_CHECK(m_->blas->set_workspace(blas_, blasWorkspace_, budget.blasWorkspaceBytes));
  if (o.arenaOnce) {
    MEMLANE_TRY(alloc(reinterpret_cast<void**>(&arena_), budget.arenaBytes, message));
    MEMLANE_TRY(alloc(&col_, budget.colBytes, message));
  }
  if (budget.errorWordBytes) {
    MEMLANE_TRY(alloc(reinterpret_cast<void**>(&err_), sizeof(int), message));
    CUDA_CHECK(cudaMemset(err_, 0, sizeof(int)));
  }
  const size_t inBytes = budget.inputStageBytes, outBytes = budget.outputStageBytes;  // maxBatch
  const int nslots = context_slots(o);
  for (int i = 0; i < 2; ++i) {
    Slot& s = slots_[i];
    s.self = this;
    s.userOut.resize(m_->plan->outputs.size());
    CUDA_CHECK(cudaEventCreateWithFlags(&s.inReady, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.inFree, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    if (i >= nslots) continue;
    if (i < budget.deviceInputSlots) MEMLANE_TRY(alloc(reinterpret_cast<void**>(&s.devIn), inBytes, message));
    if (i < budget.deviceOutputSlots) MEMLANE_TRY(alloc(reinterpret_cast<void**>(&s.devOut), outBytes, message));
    if (o.pinned) {
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.hostIn), inBytes));
      ownedHost_.push_back(s.hostIn);
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.hostOut), outBytes));
      ownedHost_.push_back(s.hostOut);
    }
    if (err_) {
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.errHost), sizeof(int)));
      ownedHost_.push_back(s.errHost);
      *s.errHost = 0;
    }
  }
  nslots_ = nslots;
  return Status::kOk;
}

Status ExecContext::forward(int64_t batch, char* arena, void* col, std::string* message) {
  ForwardEnv env;
  env.plan = m_->plan;
  env.prec = m_->prec;
  env.weights = &m_->weights;
  env.arena = arena;
  env.col = col;
  env.colElems = m_->budget.colElems;
  env.blas = m_->blas;
  env.blasHandle = blas_;
  env.halfArena = m_->budget.halfArena;
  env.err = err_;
  return enqueue_forward(env, batch, compute_, message);
}

// The forward pass: graph replay where captured; the first run of a batch size is eager
// (cuBLAS picks its kernels and lazily loaded modules load outside any capture), the
// second captures with cudaStreamCaptureModeThreadLocal (other threads' allocations do
// not invalidate it; nothing inside allocates or synchronises), later runs replay.
Status ExecContext::run_forward(int64_t batch, char* arena, void* col, std::string* message) {
  if (!m_->opt.cudaGraph || !m_->opt.arenaOnce) return forward(batch, arena, col, message);
  auto g = graphs_.find(batch);
  if (g != graphs_.end()) {
    if (!g->second) return forward(batch, arena, col, message);  // capture failed earlier
    CUDA_CHECK(cudaGraphLaunch(g->second, compute_));
    return Status::kOk;
  }
  if (++runsSeen_[batch] < 2) return forward(batch, arena, col, message);
  CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  std::string why;
  Status st = forward(batch, arena, col, &why);
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(compute_, &graph);
  cudaGraphExec_t exec = nullptr;
  if (st == Status::kOk && e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  if (st != Status::kOk || e != cudaSuccess || !exec) {
    cudaGetLastError();  // clear the capture error; the stream is usable again
    notes_.push_back("cudaGraph: batch " + std::to_string(batch) + " not captured (" +
                     (st != Status::kOk ? why : std::string(cudaGetErrorString(e))) + "); eager");
    graphs_[batch] = nullptr;
    return forward(batch, arena, col, message);
  }
  graphs_[batch] = exec;
  notes_.push_back("cudaGraph: batch " + std::to_string(batch) + " captured");
  CUDA_CHECK(cudaGraphLaunch(exec, compute_));
  return Status::kOk;
}

void CUDART_CB ExecContext::on_done(void* p) {
  Slot* s = static_cast<Slot*>(p);
  std::string message;
  s->self->finish(*s, true, &message);
}

Status ExecContext::finish(Slot& s, bool async, std::string* message) {
  const Plan& plan = *m_->plan;
  if (m_->opt.pinned) {
    size_t off = 0;
    for (size_t o = 0; o < plan.outputs.size(); ++o) {
      const size_t n = host_bytes(plan, plan.outputs[o], s.batch);
      std::memcpy(s.userOut[o], s.hostOut + off, n);
      off += staged(n);
    }
  }
  Status st = Status::kOk;
  if (s.errHost && *s.errHost > 0) {  // as the CPU backend's KernelError: the request failed, naming the op
    const int k = *s.errHost - 1;
    const Op* op = k < static_cast<int>(plan.ops.size()) ? &plan.ops[size_t(k)] : nullptr;
    *message = std::string("op ") + (op ? op_name(op->type) : "?") + " '" + (op ? op->name : "?") +
               "': an index is out of range (cuda backend; the rows it addressed are zeros)";
    st = Status::kInvalidArgument;
    *s.errHost = 0;
  }
  if (async && st != Status::kOk) {  // keep the first: later ones are usually its repeats
    std::lock_guard<std::mutex> lock(pendingMu_);
    if (pending_ == Status::kOk) {
      pending_ = st;
      pendingMessage_ = *message;
    }
  }
  // Completed exactly once (backend.h): an asynchronous request's submit returned kOk, so
  // its `done` runs whatever the outcome; a synchronous one's failure is returned by
  // submit instead, and `done` does not run.
  DoneFn fn = std::move(s.doneFn);
  s.doneFn = nullptr;
  if (fn && (async || st == Status::kOk)) fn(st, st == Status::kOk ? std::string() : *message);
  return st;
}

Status ExecContext::take_pending(std::string* message) {
  std::lock_guard<std::mutex> lock(pendingMu_);
  const Status st = pending_;
  if (st != Status::kOk) {
    *message = std::move(pendingMessage_);
    pendingMessage_.clear();
    pending_ = Status::kOk;
  }
  return st;
}

Status ExecContext::submit(int64_t batch, const float* const* inputs, float* const* outputs,
                           DoneFn done, bool sync, std::string* message) {
  const CudaOptions& o = m_->opt;
  const Plan& plan = *m_->plan;
  Slot& s = slots_[next_];
  next_ = (next_ + 1) % nslots_;
  // The slot's previous request (its copies and its host callback) must be complete;
  // for a submit (not run(): sync on entry), an asynchronous failure of that request or
  // an earlier one is returned here, and this request is not run (no `done`: backend.h).
  const bool fromRun = sync;
  CUDA_CHECK(cudaEventSynchronize(s.done));
  if (!fromRun) MEMLANE_TRY(take_pending(message));

  char* arena = arena_;
  void* col = col_;
  // The baseline the arena technique is measured against: allocated here, freed on every
  // way out of this call (an early error return included), after the request completed.
  struct PerRequest {
    char*& arena;
    void*& col;
    bool owned = false;
    ~PerRequest() {
      if (!owned) return;
      if (arena) cudaFree(arena);
      if (col) cudaFree(col);
    }
  } perRequest{arena, col};
  if (!o.arenaOnce) {
    arena = nullptr;
    col = nullptr;
    perRequest.owned = true;
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&arena), m_->budget.arenaBytes));
    if (m_->budget.colBytes) CUDA_CHECK(cudaMalloc(&col, m_->budget.colBytes));
    sync = true;
  }
  ForwardEnv env;
  env.plan = &plan;
  env.prec = m_->prec;
  env.weights = &m_->weights;
  env.arena = arena;
  env.halfArena = m_->budget.halfArena;

  // 0. A clean error word for this request, whatever an earlier one left (a failed forward
  // or copy returns before the word is read). Stream-ordered after the previous request's
  // read of it; enqueue-only, outside the captured forward.
  if (err_) CUDA_CHECK(cudaMemsetAsync(err_, 0, sizeof(int), compute_));

  // 1. Inputs: host -> (pinned) -> device slot on the copy stream -> arena.
  if (s.devIn) CUDA_CHECK(cudaStreamWaitEvent(copy_, s.inFree, 0));
  size_t off = 0;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const size_t n = host_bytes(plan, plan.inputs[i], batch);
    const char* src = reinterpret_cast<const char*>(inputs[i]);
    if (o.pinned) {
      std::memcpy(s.hostIn + off, src, n);
      src = s.hostIn + off;
    }
    void* dst = s.devIn ? static_cast<void*>(s.devIn + off) : tensor_ptr(env, plan.inputs[i], batch);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s.devIn ? copy_ : compute_));
    off += staged(n);
  }
  if (s.devIn) {
    CUDA_CHECK(cudaEventRecord(s.inReady, copy_));
    CUDA_CHECK(cudaStreamWaitEvent(compute_, s.inReady, 0));
    off = 0;
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const TensorInfo& t = plan.tensors[plan.inputs[i]];
      const size_t n = host_bytes(plan, plan.inputs[i], batch);
      void* dst = tensor_ptr(env, plan.inputs[i], batch);
      if (m_->prec == Prec::kF16 && t.dtype == DType::kFloat32)
        CUDA_CHECK(cast_f32_to_f16(reinterpret_cast<const float*>(s.devIn + off), dst, batch * t.elements(), compute_));
      else CUDA_CHECK(cudaMemcpyAsync(dst, s.devIn + off, n, cudaMemcpyDeviceToDevice, compute_));
      off += staged(n);
    }
    CUDA_CHECK(cudaEventRecord(s.inFree, compute_));
  }

  // 2. Forward.
  Status st = run_forward(batch, arena, col, message);
  if (st != Status::kOk) return st;

  // 3. Outputs: arena -> (fp32 slot) -> host (pinned staging or the caller's buffer).
  off = 0;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const TensorInfo& t = plan.tensors[plan.outputs[i]];
    const size_t n = host_bytes(plan, plan.outputs[i], batch);
    const void* src = tensor_ptr(env, plan.outputs[i], batch);
    if (m_->prec == Prec::kF16 && t.dtype == DType::kFloat32) {
      CUDA_CHECK(cast_f16_to_f32(src, reinterpret_cast<float*>(s.devOut + off), batch * t.elements(), compute_));
      src = s.devOut + off;
    }
    void* dst = o.pinned ? static_cast<void*>(s.hostOut + off) : static_cast<void*>(outputs[i]);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, compute_));
    s.userOut[i] = outputs[i];
    off += staged(n);
  }
  if (err_)  // the index ops' verdict travels with the outputs (the word is reset at step 0)
    CUDA_CHECK(cudaMemcpyAsync(s.errHost, err_, sizeof(int), cudaMemcpyDeviceToHost, compute_));
  s.batch = batch;

  // 4. Completion: a host callback after the copies (asyncOutputs), or wait here. The slot
  // holds `done` only once nothing can fail before its callback (a failed launch leaves it
  // empty: that request's submit returns the error and `done` never runs).
  if (!sync && o.asyncOutputs) {
    s.doneFn = std::move(done);
    const cudaError_t e = cudaLaunchHostFunc(compute_, &ExecContext::on_done, &s);
    if (e != cudaSuccess) {
      s.doneFn = nullptr;
      *message = cuda_error_text("cudaLaunchHostFunc(on_done)", e, __FILE__, __LINE__);
      return status_of(e);
    }
    CUDA_CHECK(cudaEventRecord(s.done, compute_));
    return Status::kOk;
  }
  CUDA_CHECK(cudaEventRecord(s.done, compute_));
  CUDA_CHECK(cudaEventSynchronize(s.done));
  s.doneFn = std::move(done);
  return finish(s, false, message);
}

Status ExecContext::drain(std::string* message) {
  if (copy_ != compute_) CUDA_CHECK(cudaStreamSynchronize(copy_));
  CUDA_CHECK(cudaStreamSynchronize(compute_));
  return take_pending(message);
}

std::string ExecContext::notes() const {
  std::string out;
  for (const std::string& n : notes_) out += (out.empty() ? "" : "; ") + n;
  return out;
}

}  // namespace memlane::cuda
