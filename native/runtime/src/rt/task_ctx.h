// What a task sees: its id, args, input tensors, a way to send phase/progress/result
// messages, and its cancel flag. Task code unwinds with TaskError (caught by the task
// thread and sent as an `error` message); nothing a request contains may crash the worker.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "memlane/protocol.h"
#include "memlane/runtime.h"
#include "rt/proc_memory.h"
#include "rt/value.h"

namespace memlane::rt {

struct TaskError {
  int code;
  std::string message;
  Val details = Val::map();
};

// An input tensor decoded from a TensorRef and its frame: float32, int64, int32 or bool
// (one byte). `data` points at its bytes (typed float* for the v1 runtime calls).
struct InTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  int64_t count = 0;
  std::string dtype = "float32";
  size_t esize = 4;
  std::vector<uint64_t> aligned;  // copy when the frame is not aligned for its dtype
};

using SendFn = std::function<void(const Val& envelope, std::vector<zmq::message_t> frames)>;

// Process-wide facts the tasks report.
struct WorkerInfo {
  std::string name = "memlane-rt";
  std::string device = "auto";
  int threads = 0;
  double startMs = 0;           // process start
  double helloMs = 0;           // when hello was sent (end of "import")
  MemoryReading atHello;        // reading at hello
  SmapsSummary atHelloSmaps;    // per-mapping summary at hello (import's end breakdown)
};

class TaskCtx {
 public:
  TaskCtx(std::string id, std::string task, const Obj* args, std::vector<InTensor> tensors, SendFn send,
          const std::atomic<bool>* cancel, const WorkerInfo* info)
      : id_(std::move(id)), task_(std::move(task)), args_(args), tensors_(std::move(tensors)),
        send_(std::move(send)), cancel_(cancel), info_(info) {}

  const std::string& id() const { return id_; }
  const std::string& task() const { return task_; }
  const WorkerInfo& info() const { return *info_; }
  std::vector<InTensor>& tensors() { return tensors_; }
  const InTensor* tensor(const std::string& name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }

  void check_cancel() const {
    if (cancel_ && cancel_->load(std::memory_order_relaxed))
      throw TaskError{int(protocol::ErrorCode::kCancelled), "task " + task_ + " (" + id_ + ") cancelled"};
  }

  // ---- args (errors name the arg, expected and found) ----
  const Obj* arg(const char* k) const { return get(args_, k); }
  [[noreturn]] void bad_arg(const std::string& k, const std::string& expected, const std::string& found) const {
    Val d = Val::map();
    d.set("arg", k).set("expected", expected).set("found", found);
    throw TaskError{int(protocol::ErrorCode::kInvalidArgument),
                    task_ + ": args." + k + ": expected " + expected + ", found " + found, d};
  }
  std::string str_arg(const char* k, const char* def = nullptr) const {
    const Obj* o = arg(k);
    if (!o || o->type == msgpack::type::NIL) {
      if (def) return def;
      bad_arg(k, "a string", "nothing");
    }
    std::string s;
    if (!as_str(*o, &s)) bad_arg(k, "a string", type_of(*o));
    return s;
  }
  int64_t int_arg(const char* k, int64_t def, int64_t min, int64_t max = INT32_MAX) const {
    const Obj* o = arg(k);
    if (!o || o->type == msgpack::type::NIL) return def;
    int64_t v;
    if (!as_int(*o, &v)) bad_arg(k, "an integer", type_of(*o));
    if (v < min || v > max) bad_arg(k, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]", std::to_string(v));
    return v;
  }
  bool bool_arg(const char* k, bool def) const {
    const Obj* o = arg(k);
    if (!o || o->type == msgpack::type::NIL) return def;
    if (o->type != msgpack::type::BOOLEAN) bad_arg(k, "true or false", type_of(*o));
    return o->via.boolean;
  }
  std::vector<int64_t> int_list_arg(const char* k, std::vector<int64_t> def, int64_t min, int64_t max) const {
    const Obj* o = arg(k);
    if (!o || o->type == msgpack::type::NIL) return def;
    std::vector<int64_t> v;
    if (!as_int_list(*o, &v) || v.empty()) bad_arg(k, "a non-empty list of integers", type_of(*o));
    for (int64_t x : v)
      if (x < min || x > max) bad_arg(k, "integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]", std::to_string(x));
    return v;
  }

  // ---- messages ----
  // A phase mark with the reading (`given`, else read now). Every end mark, and the task's
  // first mark (the baseline), also carries the per-mapping summary: `givenSmaps`, else read now.
  void phase(const char* name, bool start, const MemoryReading* given = nullptr, double tMs = -1,
             int64_t gpuKiB = -1, const SmapsSummary* givenSmaps = nullptr) const;
  void progress(int64_t current, int64_t total, const std::string& label, Val metrics) const;
  void result(Val value, Val tensorRefs, std::vector<zmq::message_t> frames) const;

 private:
  std::string id_, task_;
  const Obj* args_;
  std::vector<InTensor> tensors_;
  SendFn send_;
  const std::atomic<bool>* cancel_;
  const WorkerInfo* info_;
  mutable bool smapsSent_ = false;
};

Val envelope(const char* type, const std::string& id);
[[noreturn]] void throw_rt_error(const RtError& e);
// RuntimeOptions from the task's device/threads/variant/cuda args (CLI flags as defaults).
RuntimeOptions runtime_options(const TaskCtx& c, std::string* device);
Val memory_val(const MemoryReading& m);
Val smaps_val(const SmapsSummary& s);
Val error_envelope(const std::string& id, int code, const std::string& message, const Val& details);

// Tasks (tasks_*.cc). The loaded model for load/run lives in WorkerState.
struct WorkerState {
  std::unique_ptr<Runtime> loaded;
};
inline constexpr const char* kCapabilities[] = {"infer.native", "load", "run"};
void task_infer_native(TaskCtx& ctx);
void task_load(TaskCtx& ctx, WorkerState& state);
void task_run(TaskCtx& ctx, WorkerState& state);

}  // namespace memlane::rt
