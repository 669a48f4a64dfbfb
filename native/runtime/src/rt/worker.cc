#include "rt/worker.h"

#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "core/hmac_sha256.h"
#include "rt/shm_map.h"
#include "rt/task_ctx.h"

namespace memlane::rt {
namespace {

using protocol::ErrorCode;
constexpr int kPollMs = 250;

struct Job {
  std::string id, task;
  msgpack::object_handle env;
  std::vector<zmq::message_t> frames;
};

// The per-spawn key from the environment, then wiped: the value's bytes are overwritten in
// place (they live in the block /proc/<pid>/environ shows) and the variable is unset, so
// nothing this process starts inherits it. Empty when the orchestrator gave none.
std::string take_key() {
  char* text = std::getenv(protocol::kEnvWorkerKey);
  if (!text) return {};
  std::string key;
  const bool ok = from_hex(text, &key);
  std::memset(text, 'x', std::strlen(text));
  unsetenv(protocol::kEnvWorkerKey);
  if (!ok) throw std::runtime_error(std::string(protocol::kEnvWorkerKey) + " must be hex");
  return key;
}

int64_t max_message_bytes() {
  const char* text = std::getenv(protocol::kEnvMaxMessageBytes);
  if (!text || !*text) return protocol::kDefaultMaxMessageBytes;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!end || *end != 0 || v < 1024)
    throw std::runtime_error(std::string(protocol::kEnvMaxMessageBytes) + ": expected an integer >= 1024, got '" + text + "'");
  return int64_t(v);
}

std::string versions_zmq() {
  int a, b, c;
  zmq_version(&a, &b, &c);
  return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c);
}

// TensorRefs of a task -> InTensor views of its frames or of its shared-memory segments,
// mapped in `shm` until the task ends (float32, int64, int32, bool/uint8: what plan v2 takes).
std::vector<InTensor> decode_tensors(const Obj* refs, const std::vector<zmq::message_t>& frames, const std::string& task, ShmMaps& shm) {
  std::vector<InTensor> out;
  if (!refs || refs->type == msgpack::type::NIL) return out;
  auto bad = [&](int code, const std::string& msg) -> TaskError { return TaskError{code, task + ": " + msg}; };
  if (refs->type != msgpack::type::ARRAY) throw bad(int(ErrorCode::kMalformedMessage), "`tensors` must be an array of TensorRef");
  for (uint32_t i = 0; i < refs->via.array.size; ++i) {
    const Obj& r = refs->via.array.ptr[i];
    const std::string where = "tensors[" + std::to_string(i) + "]";
    InTensor t;
    std::string dtype;
    const Obj* name = get(&r, "name");
    const Obj* dt = get(&r, "dtype");
    const Obj* shape = get(&r, "shape");
    if (!name || !as_str(*name, &t.name) || !dt || !as_str(*dt, &dtype) || !shape || !as_int_list(*shape, &t.shape))
      throw bad(int(ErrorCode::kMalformedMessage), where + " lacks a string name, a string dtype or an integer shape");
    const Obj* sm = get(&r, "shm");
    const bool in_shm = sm && sm->type != msgpack::type::NIL;
    int64_t fi = -1;
    if (!in_shm) {
      const Obj* f = get(&r, "frame");
      if (!f || !as_int(*f, &fi)) throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "') lacks an integer frame (or shm)");
      if (fi < 0 || fi >= int64_t(frames.size()))
        throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "') references frame " + std::to_string(fi) + " but the message has " + std::to_string(frames.size()) + " frame(s)");
    }
    const size_t esize = dtype == "float32" || dtype == "int32" ? 4 : dtype == "int64" ? 8 : dtype == "bool" || dtype == "uint8" ? 1 : 0;
    if (esize == 0) {
      Val d = Val::map();
      d.set("tensor", t.name).set("expected", "float32|int64|int32|bool|uint8").set("got", dtype);
      throw TaskError{int(ErrorCode::kInvalidArgument), task + ": tensor '" + t.name + "': dtype expected float32, int64, int32 or bool, got " + dtype, d};
    }
    t.dtype = dtype == "uint8" ? "bool" : dtype;  // bool travels as one byte a value
    t.esize = esize;
    const int64_t es = int64_t(esize);
    int64_t count = 1;
    for (int64_t d : t.shape) {
      if (d < 0 || (d > 0 && count > (int64_t(1) << 40) / d))
        throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "') has an invalid shape");
      count *= d;
    }
    const void* bytes;
    size_t size;
    if (in_shm) {
      std::string segment;
      int64_t offset, length;
      const Obj* sg = sm->type == msgpack::type::MAP ? get(sm, "segment") : nullptr;
      const Obj* so = sm->type == msgpack::type::MAP ? get(sm, "offset") : nullptr;
      const Obj* sl = sm->type == msgpack::type::MAP ? get(sm, "length") : nullptr;
      if (!sg || !as_str(*sg, &segment) || !so || !as_int(*so, &offset) || !sl || !as_int(*sl, &length))
        throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "'): shm must be a map {segment, offset, length}");
      if (length != count * es)
        throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "'): shm length " + std::to_string(length) + " bytes, the shape needs " + std::to_string(count * es));
      bytes = shm.range(segment, offset, length, task + ": " + where + " ('" + t.name + "')");
      size = size_t(length);
    } else {
      const zmq::message_t& fr = frames[size_t(fi)];
      if (fr.size() != size_t(count * es))
        throw bad(int(ErrorCode::kMalformedMessage), where + " ('" + t.name + "'): frame " + std::to_string(fi) + " holds " +
                                                       std::to_string(fr.size()) + " bytes, the shape needs " + std::to_string(count * es));
      bytes = fr.data();
      size = fr.size();
    }
    t.count = count;
    if (reinterpret_cast<uintptr_t>(bytes) % esize != 0) {
      t.aligned.resize((size + 7) / 8);
      std::memcpy(t.aligned.data(), bytes, size);
      t.data = reinterpret_cast<const float*>(t.aligned.data());
    } else {
      t.data = static_cast<const float*>(bytes);
    }
    out.push_back(std::move(t));
  }
  return out;
}

class Worker {
 public:
  Worker(const WorkerOptions& o, double startMs)
      : o_(o), dealer_(ctx_, zmq::socket_type::dealer), rx_(ctx_, zmq::socket_type::pair), tx_(ctx_, zmq::socket_type::pair) {
    info_.name = o.name;
    info_.device = o.device;
    info_.threads = o.threads;
    info_.startMs = startMs;
    key_ = take_key();
    max_bytes_ = max_message_bytes();
    dealer_.set(zmq::sockopt::linger, 2000);
    dealer_.set(zmq::sockopt::sndtimeo, 10000);  // never block forever on a dead peer
    // libzmq refuses a bigger incoming frame from its header, before allocating it, and drops
    // the connection. (The inproc outbox below never decodes frames: the option means nothing there.)
    dealer_.set(zmq::sockopt::maxmsgsize, max_bytes_);
    dealer_.connect(o.endpoint);
    const std::string inproc = "inproc://memlane-rt-outbox";
    rx_.bind(inproc);
    tx_.connect(inproc);
    parent_ = getppid();
  }

  int serve() {
    hello();
    task_thread_ = std::thread([this] { task_loop(); });
    task_thread_.detach();  // the process exits with _exit; the thread never outlives it
    zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0}, {rx_.handle(), 0, ZMQ_POLLIN, 0}};
    auto last_heard = std::chrono::steady_clock::now();
    for (;;) {
      zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
      if (items[0].revents & ZMQ_POLLIN) {
        last_heard = std::chrono::steady_clock::now();
        for (;;) {
          std::vector<zmq::message_t> parts;
          if (!recv_all(dealer_, &parts)) break;
          handle(std::move(parts));
        }
      }
      if (items[1].revents & ZMQ_POLLIN) {
        for (;;) {
          std::vector<zmq::message_t> parts;
          if (!recv_all(rx_, &parts)) break;
          send_parts(std::move(parts));
        }
      }
      const double silent = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_heard).count();
      if (o_.heartbeatTimeoutS > 0 && silent > o_.heartbeatTimeoutS) {
        std::fprintf(stderr, "memlane-rt: no message from the orchestrator for %.1fs (--heartbeat-timeout %.1f); exiting\n",
                     silent, o_.heartbeatTimeoutS);
        exit_now(kExitOrphaned);
      }
      if (getppid() != parent_) {
        std::fprintf(stderr, "memlane-rt: parent process exited; exiting\n");
        exit_now(kExitOrphaned);
      }
    }
  }

 private:
  static bool recv_all(zmq::socket_t& s, std::vector<zmq::message_t>* parts) {
    for (;;) {
      zmq::message_t m;
      auto r = s.recv(m, parts->empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
      if (!r) return false;
      const bool more = m.more();
      parts->push_back(std::move(m));
      if (!more) return true;
    }
  }

  // Sends one message, or, when it is over the run's limit (the orchestrator would drop our
  // connection for it), a TASK_FAILED error naming the sizes under the same id.
  void send_parts(std::vector<zmq::message_t> parts) {
    size_t total = 0;
    for (const auto& p : parts) total += p.size();
    if (int64_t(total) > max_bytes_ && !parts.empty()) {
      std::string id;
      try {
        msgpack::object_handle oh = unpack_bounded(static_cast<const char*>(parts[0].data()), parts[0].size());
        if (const Obj* idv = get(&oh.get(), "id")) as_str(*idv, &id);
      } catch (const std::exception&) {
      }
      Val d = Val::map();
      d.set("bytes", int64_t(total)).set("limit", max_bytes_);
      const std::string b = packb(error_envelope(id, int(ErrorCode::kTaskFailed),
                                                 "message of " + std::to_string(total) + " bytes exceeds the limit of " +
                                                     std::to_string(max_bytes_) + " bytes (the run's maxMessageBytes; raise it for bigger tensors)",
                                                 d));
      parts.clear();
      parts.emplace_back(b.data(), b.size());
    }
    try {
      for (size_t i = 0; i < parts.size(); ++i)
        dealer_.send(parts[i], i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      std::fprintf(stderr, "memlane-rt: send failed: %s\n", e.what());
    }
  }
  void send(const Val& env, std::vector<zmq::message_t> frames = {}) {
    std::vector<zmq::message_t> parts;
    const std::string b = packb(env);
    parts.emplace_back(b.data(), b.size());
    for (auto& f : frames) parts.push_back(std::move(f));
    send_parts(std::move(parts));
  }
  void error(const std::string& id, ErrorCode code, const std::string& msg, Val details = Val::map()) {
    send(error_envelope(id, int(code), msg, details));
  }

  [[noreturn]] void exit_now(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (code != 0) dealer_.set(zmq::sockopt::linger, 500);
    else dealer_.set(zmq::sockopt::linger, 0);
    // _exit: a running task (BLAS threads, a long run) must not keep the process alive.
    _exit(code);
  }

  void hello() {
    Val caps = Val::array();
    for (const char* c : kCapabilities) caps.push(c);
    caps.push(kShmCapability);  // not a task: it reads `shm` TensorRefs (rt/shm_map.h)
    Val versions = Val::map();
    versions.set("memlane-rt", "0.1.0")
        .set("protocol", std::to_string(protocol::kVersion))
        .set("openblas", blas_version())
        .set("zmq", versions_zmq())
        .set("msgpack-cxx", MSGPACK_VERSION)
        .set("compiler", std::string("g++ ") + __VERSION__)
        .set("cuda", cuda_built() ? "built" : "not built");
    const std::string helloId = o_.name + "-" + std::to_string(getpid());
    Val h = envelope(protocol::type::kHello, helloId);
    h.set("pid", int64_t(getpid())).set("worker", "memlane-rt").set("capabilities", std::move(caps)).set("versions", std::move(versions));
    if (!key_.empty()) {
      const std::string text = std::string(protocol::kHelloAuthPrefix) + helloId + "\n" + std::to_string(getpid());
      const Sha256Digest mac = hmac_sha256(reinterpret_cast<const uint8_t*>(key_.data()), key_.size(),
                                           reinterpret_cast<const uint8_t*>(text.data()), text.size());
      h.set("auth", to_hex(mac.data(), mac.size()));
    }
    info_.atHello = read_memory();
    info_.atHelloSmaps = read_smaps();
    info_.helloMs = now_ms();
    send(h);
    // import = process start to hello (all linked in; nothing loads lazily). Reported now
    // under the hello's id, and again under each infer.native task's id so that the
    // task's phase list is complete.
    const std::string id = o_.name + "-" + std::to_string(getpid());
    for (bool start : {true, false}) {
      Val e = envelope(protocol::type::kPhase, id);
      e.set("name", protocol::phase::kImport)
          .set("mark", start ? protocol::kMarkStart : protocol::kMarkEnd)
          .set("tMs", start ? info_.startMs : info_.helloMs)
          .set("memory", memory_val(start ? MemoryReading{} : info_.atHello));
      send(e);
    }
  }

  void handle(std::vector<zmq::message_t> parts) {
    msgpack::object_handle oh;
    std::string id, type;
    int64_t v = 0;
    auto malformed = [&](const std::string& why) {
      Val d = Val::map();
      d.set("reason", why);
      error(id, ErrorCode::kMalformedMessage, "malformed message: " + why, d);
    };
    try {
      oh = unpack_bounded(static_cast<const char*>(parts[0].data()), parts[0].size());
    } catch (const std::exception& e) {
      return malformed(std::string("the envelope is not msgpack (") + e.what() + ")");
    }
    const Obj& env = oh.get();
    if (env.type != msgpack::type::MAP) return malformed(std::string("the envelope is a ") + type_of(env) + ", not a map");
    const Obj* idv = get(&env, "id");
    if (idv) as_str(*idv, &id);
    const Obj* vv = get(&env, "v");
    const Obj* tv = get(&env, "type");
    if (!idv || idv->type != msgpack::type::STR) return malformed("the envelope lacks a string `id`");
    if (!vv || !as_int(*vv, &v)) return malformed("the envelope lacks an integer `v`");
    if (!tv || !as_str(*tv, &type)) return malformed("the envelope lacks a string `type`");
    if (v != protocol::kVersion) {
      Val d = Val::map();
      d.set("orchestrator", v).set("worker", protocol::kVersion).set("type", type);
      return error(id, ErrorCode::kVersionMismatch,
                   "orchestrator speaks protocol v" + std::to_string(v) + ", worker speaks v" + std::to_string(protocol::kVersion), d);
    }
    if (type == protocol::type::kHeartbeat) {
      send(envelope(protocol::type::kHeartbeat, id));
    } else if (type == protocol::type::kTask) {
      std::string task;
      const Obj* tn = get(&env, "task");
      if (!tn || !as_str(*tn, &task)) return malformed("task message lacks a string `task`");
      bool known = false;
      for (const char* c : kCapabilities) known = known || task == c;
      if (!known) {
        Val d = Val::map(), caps = Val::array();
        for (const char* c : kCapabilities) caps.push(c);
        d.set("task", task).set("capabilities", std::move(caps));
        return error(id, ErrorCode::kUnknownTask, "unknown task '" + task + "'; memlane-rt runs infer.native, load, run", d);
      }
      const Obj* args = get(&env, "args");
      if (args && args->type != msgpack::type::MAP && args->type != msgpack::type::NIL)
        return error(id, ErrorCode::kMalformedMessage, "task " + task + ": args must be a map, got " + type_of(*args));
      Job j{id, task, std::move(oh), {}};
      for (size_t i = 1; i < parts.size(); ++i) j.frames.push_back(std::move(parts[i]));
      {
        std::lock_guard<std::mutex> lk(mu_);
        queue_.push_back(std::move(j));
      }
      cv_.notify_one();
    } else if (type == protocol::type::kCancel) {
      bool was_queued = false;
      {
        std::lock_guard<std::mutex> lk(mu_);
        for (auto it = queue_.begin(); it != queue_.end(); ++it)
          if (it->id == id) {
            queue_.erase(it);
            was_queued = true;
            break;
          }
        if (!was_queued && current_ == id) cancel_.store(true);
      }
      if (was_queued) error(id, ErrorCode::kCancelled, "task " + id + " cancelled before it started");
    } else if (type == protocol::type::kShutdown) {
      exit_now(0);
    } else if (type == protocol::type::kError) {
      const Obj* m = get(&env, "message");
      std::string text;
      if (m) as_str(*m, &text);
      std::fprintf(stderr, "memlane-rt: orchestrator error: %s\n", text.c_str());
    } else {
      Val d = Val::map();
      d.set("type", type);
      error(id, ErrorCode::kUnknownType, "memlane-rt does not accept messages of type '" + type +
                                             "' (accepts task, cancel, heartbeat, shutdown, error)", d);
    }
  }

  // ---- task thread ----
  void task_send(const Val& env, std::vector<zmq::message_t> frames) {
    try {
      std::vector<zmq::message_t> parts;
      const std::string b = packb(env);
      parts.emplace_back(b.data(), b.size());
      for (auto& f : frames) parts.push_back(std::move(f));
      for (size_t i = 0; i < parts.size(); ++i)
        tx_.send(parts[i], i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memlane-rt: task message lost: %s\n", e.what());
    }
  }

  void task_loop() {
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return !queue_.empty(); });
        j = std::move(queue_.front());
        queue_.pop_front();
        current_ = j.id;
        cancel_.store(false);
      }
      run_job(j);
      std::lock_guard<std::mutex> lk(mu_);
      current_.clear();
    }
  }

  void run_job(Job& j) {
    SendFn send = [this](const Val& e, std::vector<zmq::message_t> f) { task_send(e, std::move(f)); };
    try {
      const Obj& env = j.env.get();
      ShmMaps shm;  // declared before ctx: the segments stay mapped until the task is done
      std::vector<InTensor> tensors = decode_tensors(get(&env, "tensors"), j.frames, j.task, shm);
      TaskCtx ctx(j.id, j.task, get(&env, "args"), std::move(tensors), send, &cancel_, &info_);
      ctx.check_cancel();
      if (j.task == "infer.native") task_infer_native(ctx);
      else if (j.task == "load") task_load(ctx, state_);
      else task_run(ctx, state_);
    } catch (const TaskError& e) {
      task_send(error_envelope(j.id, e.code, e.message, e.details), {});
    } catch (const std::bad_alloc&) {
      task_send(error_envelope(j.id, int(ErrorCode::kOutOfMemory), j.task + ": out of host memory", Val::map()), {});
    } catch (const std::exception& e) {
      task_send(error_envelope(j.id, int(ErrorCode::kTaskFailed), j.task + ": " + e.what(), Val::map()), {});
    }
  }

  WorkerOptions o_;
  std::string key_;  // per-spawn key (raw bytes); empty without one
  int64_t max_bytes_ = protocol::kDefaultMaxMessageBytes;
  WorkerInfo info_;
  WorkerState state_;
  zmq::context_t ctx_;
  zmq::socket_t dealer_, rx_, tx_;
  pid_t parent_ = 0;
  std::thread task_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::string current_;
  std::atomic<bool> cancel_{false};
};

}  // namespace

int serve(const WorkerOptions& options, double processStartMs) {
  Worker w(options, processStartMs);
  return w.serve();
}

}  // namespace memlane::rt
