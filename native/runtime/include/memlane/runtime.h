// memlane-rt's C++ API: create a runtime on a device, load a .mlplan (mapped, never
// copied), run batches with shape and NaN checks. Used by the memlane-rt executable, the
// N-API addon and the tests. Failures are returned as RtError (a protocol error code, a
// message naming what was expected and found, and structured details), never thrown.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "memlane/protocol.h"

namespace memlane {

using DetailValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

struct RtError {
  int code = 0;  // protocol::ErrorCode value; 0 = no error
  std::string message;
  std::vector<std::pair<std::string, DetailValue>> details;
};

struct RuntimeOptions {
  std::string device = "auto";  // "cpu", "cuda" or "auto" (cuda when built and a device exists)
  int threads = 0;              // intra-op threads, 0 = all cores
  std::map<std::string, std::string> switches;  // backend switches (CUDA variant, ...)
  // Sub-phases a backend reports (GPU: cuda-context, weights-upload, arena).
  std::function<void(const char* phase, bool start)> phaseMark;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // the plan's shape: -1 at batchAxis (plan v2: any axis)
  int64_t elementsPerSample = 0;
  std::string dtype = "float32";  // float32 | int64 | int32 | bool (one byte)
  int batchAxis = 0;
  size_t elementBytes = 4;
  // The batch-first shape for a batch of n, as tensors travel on the wire: [n, other dims].
  std::vector<int64_t> wire_shape(int64_t n) const;
};

// Moves the batch axis of a batch of n between the wire layout (batch first) and the plan's
// layout (batch at t.batchAxis); a plain copy when batchAxis is 0. src and dst must not overlap.
void move_batch_axis(const void* src, void* dst, int64_t n, const TensorSpec& t, bool toPlan);

// Points of RuntimeMemory::workspaceBytesByBatch: batches 1, 2, 4 ... 1024.
inline constexpr int kWorkspaceCurvePoints = 11;

struct RuntimeMemory {
  uint64_t arenaBytes = 0;
  uint64_t weightsBytes = 0;        // weights in the plan
  uint64_t weightsBytesHost = 0;    // weight bytes the backend copied into host memory it owns
  uint64_t weightsBytesDevice = 0;  // weight bytes on the device
  uint64_t workspaceBytes = 0;
  uint64_t planFileBytes = 0;       // size of the mapping
  uint64_t weightsBytesReleased = 0;  // plan weight bytes given back after repacking (the cpu
                                      // backend's copies replace them; docs/memory.md)
  uint64_t batchTailBytesPerSample = 0;  // cpu: arena per sample of the last ops, run over the
                                         // whole batch where a batch is split into chunks
  // cpu: of the plan's arena a sample, the bytes no kernel writes (the tensors inside a fused
  // kernel that no other tensor shares): never resident, whatever the batch.
  uint64_t arenaUnwrittenBytesPerSample = 0;
  // cpu: the largest kernel workspace for 2^i samples run at once (i < kWorkspaceCurvePoints),
  // so the workspace a batch touches can be known from a load at maxBatch 1 (memlane estimate's
  // probe). A curve, not a slope: a conv's im2col chunk stops growing at its cap (digits-cnn's
  // at 64 samples took a fifth of what one sample's growth times 63 said).
  std::vector<uint64_t> workspaceBytesByBatch;
  // cpu: the batch tail's (batchTailBytesPerSample) own figures: the bytes of its arena a sample
  // no kernel writes, and its kernels' workspace for 2^i samples. Where a batch is split its tail
  // runs over the whole batch in the same workspace the chunks use: the run touches the larger.
  uint64_t batchTailUnwrittenBytesPerSample = 0;
  std::vector<uint64_t> batchTailWorkspaceBytesByBatch;
  int64_t deviceUsedBytes = -1;     // -1 = unknown
};

// One plan op's time while profiling was on (Runtime::set_profiling): summed over every call
// (a batch run in chunks calls each kernel once a chunk). `fused` names the ops folded into this
// one's kernel ("Add+Relu" after a Conv), empty when none.
struct OpTiming {
  std::string name;
  std::string opType;
  std::string fused;
  std::string kernel;  // the CPU kernel's path ("im2col", "winograd_avx2", ...); empty where it has one path
  double totalMs = 0;
  double minMs = 0;  // the fastest single call: robust to preemption on a busy machine
  uint64_t calls = 0;
};

struct OpProfile {
  uint64_t runs = 0;  // backend runs while profiling was on
  std::vector<OpTiming> ops;  // plan order, ops with a kernel of their own only
};

class Runtime {
 public:
  // Picks and creates the backend (the "runtime-create" phase). nullptr + *err on failure
  // (BACKEND_UNAVAILABLE for "cuda" without a CUDA build or device, INVALID_ARGUMENT).
  static std::unique_ptr<Runtime> create(const RuntimeOptions& options, RtError* err);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const char* device() const;  // "cpu" / "cuda"

  // Maps and validates the plan, prepares the backend for maxBatch (the "model-load"
  // phase). PLAN_INVALID / UNSUPPORTED_OP / OUT_OF_MEMORY / INVALID_ARGUMENT on failure.
  // Once only per Runtime.
  bool load(const std::string& planPath, int64_t maxBatch, RtError* err);
  bool loaded() const;

  int64_t max_batch() const;
  // The active shape profile's inputs and outputs (profile 0 until check_inputs picks another).
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;

  // Shape profiles of the loaded plan (docs/plan-format.md, "Profiles"): they differ only in
  // non-batch dimensions; one backend each, sharing the weights and one host arena.
  size_t profile_count() const;
  size_t active_profile() const;
  const std::vector<TensorSpec>& profile_inputs(size_t profile) const;
  // "#1 input_ids [N,64], attention_mask [N,64]" (wire shapes, N = the batch), for messages.
  std::string profile_text(size_t profile) const;

  // Makes the profile whose inputs have exactly these non-batch dims (wire shapes, batch
  // first) the active one; SHAPE_MISMATCH listing every profile when none has. With one profile
  // it accepts anything (check_inputs then names the input that differs).
  bool select_profile(const std::vector<std::vector<int64_t>>& shapes, RtError* err);

  // select_profile, then checks every input against the active profile: its shape is
  // TensorSpec::wire_shape(batch) (batch first) with one batch
  // for all and 1 <= batch <= maxBatch, its dtype the plan's (SHAPE_MISMATCH naming the input,
  // expected and got), and a float input holds no NaN (NAN_INPUT naming the tensor and the
  // flat index). Sets *batch. data[i] points at the tensor's bytes (any layout).
  bool check_inputs(const std::vector<std::vector<int64_t>>& shapes, const std::vector<std::string>& dtypes,
                    const float* const* data, int64_t* batch, RtError* err);
  // The same with every dtype float32 (the v1 callers).
  bool check_inputs(const std::vector<std::vector<int64_t>>& shapes, const float* const* data,
                    int64_t* batch, RtError* err);

  // check_inputs, then run. Tensors are in the plan's layout and dtype (passed as float* for
  // the v1 signature; cast from the dtype's bytes). outputs[i] must hold
  // batch * outputs()[i].elementsPerSample elements of its dtype.
  bool run(const std::vector<std::vector<int64_t>>& shapes, const float* const* inputs,
           float* const* outputs, RtError* err);

  // Runs the active profile without the checks (the timed loop): the caller guarantees valid inputs.
  bool run_unchecked(int64_t batch, const float* const* inputs, float* const* outputs, RtError* err);

  // Asynchronous run_unchecked: returns once the inputs are consumed; `outputs` must stay
  // valid until `done` runs (the CUDA backend: on a driver callback thread, and only with
  // its asyncOutputs switch; the CPU backend: before submit returns). At most
  // max_in_flight() requests are in flight, so that many output buffers used in rotation
  // are never written by two requests at once. A failure found before the request is in
  // flight is returned by this call (`done` then never runs; the CPU backend's every
  // failure). A failure of an in-flight request (the CUDA backend's index out of range,
  // found on the device) is returned once, by the next submit_unchecked (which then does
  // not run its own request) or by drain(), which waits for all of them; `done` still runs.
  bool submit_unchecked(int64_t batch, const float* const* inputs, float* const* outputs,
                        std::function<void()> done, RtError* err);
  bool drain(RtError* err);
  int max_in_flight() const;

  // What the backend did with its options at run time (CUDA: graphs captured or not,
  // host weight pages released, where device memory is read from); may be empty.
  std::string notes() const;

  RuntimeMemory memory() const;

  // Per-op timing (docs/profiling.md): on, every later run times each op's kernel (the CPU
  // backend: steady_clock around each call, on the serial path) and starts a fresh profile;
  // off, runs pay nothing. Returns false with UNSUPPORTED_OP where the backend cannot (CUDA).
  bool set_profiling(bool on, RtError* err);
  OpProfile op_profile() const;

 private:
  Runtime();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "openblas <version/config>", used in the hello's versions.
std::string blas_version();
bool cuda_built();

}  // namespace memlane
