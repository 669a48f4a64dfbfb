// The Runtime API (include/memlane/runtime.h): device choice, plan loading, input checks.
#include "memlane/runtime.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backend.h"
#include "plan/plan.h"

namespace memlane {
namespace {

using protocol::ErrorCode;

int code_for(Status s) {
  switch (s) {
    case Status::kOk: return 0;
    case Status::kPlanInvalid: return int(ErrorCode::kPlanInvalid);
    case Status::kUnsupportedOp: return int(ErrorCode::kUnsupportedOp);
    case Status::kShapeMismatch: return int(ErrorCode::kShapeMismatch);
    case Status::kNanInput: return int(ErrorCode::kNanInput);
    case Status::kOutOfMemory: return int(ErrorCode::kOutOfMemory);
    case Status::kBackendUnavailable: return int(ErrorCode::kBackendUnavailable);
    case Status::kCancelled: return int(ErrorCode::kCancelled);
    case Status::kInvalidArgument:
    case Status::kIoError:
    case Status::kNotLoaded: return int(ErrorCode::kInvalidArgument);
    case Status::kInternal: return int(ErrorCode::kTaskFailed);
  }
  return int(ErrorCode::kTaskFailed);
}

bool set_err(RtError* e, int code, std::string msg) {
  if (e) {
    e->code = code;
    e->message = std::move(msg);
    e->details.clear();
  }
  return false;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  BackendOptions backendOptions;  // what every backend of this runtime is made with
  // One backend per shape profile of the plan (docs/plan-format.md, "Profiles"), index =
  // profile; backends[0] is made at create(), the others at load. They share one host arena.
  std::vector<std::unique_ptr<Backend>> backends;
  std::unique_ptr<PlanFile> file;
  std::vector<std::vector<TensorSpec>> inputs, outputs;  // per profile
  size_t active = 0;  // the profile check_inputs matched last
  int64_t maxBatch = 0;
  std::string fallback;  // why `auto` fell back to the CPU backend at load, if it did
  Backend& backend() const { return *backends[active]; }
};

Runtime::Runtime() : impl_(std::make_unique<Impl>()) {}
Runtime::~Runtime() {
  if (impl_) impl_->backends.clear();  // before the mapping they read from
}

std::unique_ptr<Runtime> Runtime::create(const RuntimeOptions& options, RtError* err) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto") {
    set_err(err, int(ErrorCode::kInvalidArgument), "device: expected \"cpu\", \"cuda\" or \"auto\", found \"" + options.device + "\"");
    return nullptr;
  }
  if (options.threads < 0) {
    set_err(err, int(ErrorCode::kInvalidArgument), "threads: expected >= 0, found " + std::to_string(options.threads));
    return nullptr;
  }
  BackendOptions bo;
  bo.threads = options.threads;
  bo.switches = options.switches;
  bo.phaseMark = options.phaseMark;
  bo.sharedHost = std::make_shared<SharedHostBuffers>();
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->impl_->options = options;
  rt->impl_->backendOptions = bo;
  rt->impl_->backends.resize(1);
  std::unique_ptr<Backend>& backend = rt->impl_->backends[0];
  Status st = Status::kOk;
  std::string msg;
  if (options.device != "cpu") {
#ifdef MEMLANE_HAVE_CUDA
    backend = make_cuda_backend(bo, &st, &msg);
#else
    st = Status::kBackendUnavailable;
    msg = "memlane-rt was built without CUDA (MEMLANE_WITH_CUDA=OFF or no nvcc at build time)";
#endif
    if (!backend && options.device == "cuda") {
      set_err(err, code_for(st == Status::kOk ? Status::kBackendUnavailable : st), "device cuda: " + msg);
      return nullptr;
    }
  }
  if (!backend) {
    backend = make_cpu_backend(bo, &st, &msg);
    if (!backend) {
      set_err(err, code_for(st), msg);
      return nullptr;
    }
  }
  return rt;
}

const char* Runtime::device() const { return impl_->backends[0]->name(); }
bool Runtime::loaded() const { return impl_->file != nullptr; }
int64_t Runtime::max_batch() const { return impl_->maxBatch; }
// Before load: no profile yet, empty lists.
static const std::vector<TensorSpec> kNoSpecs;
const std::vector<TensorSpec>& Runtime::inputs() const { return impl_->inputs.empty() ? kNoSpecs : impl_->inputs[impl_->active]; }
const std::vector<TensorSpec>& Runtime::outputs() const { return impl_->outputs.empty() ? kNoSpecs : impl_->outputs[impl_->active]; }
size_t Runtime::profile_count() const { return impl_->inputs.size(); }
size_t Runtime::active_profile() const { return impl_->active; }
const std::vector<TensorSpec>& Runtime::profile_inputs(size_t p) const { return impl_->inputs.at(p); }

std::string Runtime::profile_text(size_t p) const {
  std::string s = "#" + std::to_string(p) + " ";
  const auto& ins = impl_->inputs.at(p);
  for (size_t i = 0; i < ins.size(); ++i) {
    std::vector<int64_t> w = ins[i].wire_shape(-1);
    std::string d = "[";
    for (size_t k = 0; k < w.size(); ++k) d += (k ? "," : "") + (k == 0 ? std::string("N") : std::to_string(w[k]));
    s += (i ? ", " : "") + ins[i].name + " " + d + "]";
  }
  return s;
}

bool Runtime::load(const std::string& planPath, int64_t maxBatch, RtError* err) {
  if (impl_->file) return set_err(err, int(ErrorCode::kInvalidArgument), "a model is already loaded in this runtime");
  if (maxBatch < 1) return set_err(err, int(ErrorCode::kInvalidArgument), "maxBatch: expected >= 1, found " + std::to_string(maxBatch));
  std::unique_ptr<PlanFile> file;
  std::string msg;
  Status st = read_plan(planPath, &file, &msg);
  if (st != Status::kOk) {
    set_err(err, code_for(st), msg);
    if (err) err->details.push_back({"path", planPath});
    return false;
  }
  const std::vector<Plan>& profiles = file->profiles();
  const Plan& plan = profiles[0];
  if (plan.inputs.empty() || plan.outputs.empty())
    return set_err(err, int(ErrorCode::kPlanInvalid), planPath + ": the plan has no inputs or no outputs");
  auto& backends = impl_->backends;
  // `auto` means "the best backend that runs this plan": the CPU backend when the GPU one
  // lacks an op or dtype of the plan (plan v2 ops are CPU-first), or the plan has several
  // shape profiles (the CUDA backend runs one: it would upload the weights once per profile).
  auto fall_back_to_cpu = [&](const std::string& why) {
    BackendOptions bo = impl_->backendOptions;
    bo.phaseMark = nullptr;
    backends[0].reset();
    backends[0] = make_cpu_backend(bo, &st, &msg);
    impl_->fallback = "cuda backend refused the plan (" + why + "); running on cpu";
    return backends[0] != nullptr;
  };
  const bool on_cpu = std::string(backends[0]->name()) == "cpu";
  if (profiles.size() > 1 && !on_cpu) {
    std::string why = "it holds " + std::to_string(profiles.size()) + " shape profiles; the " + backends[0]->name() +
                      " backend runs plans of one profile";
    if (impl_->options.device != "auto")
      return set_err(err, int(ErrorCode::kUnsupportedOp),
                     planPath + ": " + why + ": compile one plan per shape for it (memlane compile --shape), or load it on device cpu");
    if (!fall_back_to_cpu(why)) return set_err(err, code_for(st), msg);
  }
  st = backends[0]->prepare(plan, maxBatch, &msg);
  if (st == Status::kUnsupportedOp && impl_->options.device == "auto" && std::string(backends[0]->name()) != "cpu") {
    if (!fall_back_to_cpu(msg)) return set_err(err, code_for(st), msg);
    st = backends[0]->prepare(plan, maxBatch, &msg);
  }
  if (st != Status::kOk) return set_err(err, code_for(st), planPath + ": " + (profiles.size() > 1 ? "profile 0: " : "") + msg);
  // The other profiles: CPU backends on the same shared host arena (BackendOptions::sharedHost).
  for (size_t p = 1; p < profiles.size(); ++p) {
    BackendOptions bo = impl_->backendOptions;
    bo.phaseMark = nullptr;
    std::unique_ptr<Backend> b = make_cpu_backend(bo, &st, &msg);
    if (b) st = b->prepare(profiles[p], maxBatch, &msg);
    if (!b || st != Status::kOk) {
      const int code = code_for(st);
      const std::string why = planPath + ": profile " + std::to_string(p) + ": " + msg;
      // backends[0] was prepared for this plan, which goes away with `file`: a fresh, unprepared
      // CPU backend instead (several profiles run only there), so a later load() can prepare it.
      backends.resize(1);
      BackendOptions fresh = impl_->backendOptions;
      fresh.phaseMark = nullptr;
      backends[0] = make_cpu_backend(fresh, &st, &msg);
      return set_err(err, code, why);
    }
    backends.push_back(std::move(b));
  }
  auto spec = [&](const Plan& plan, int32_t id) {
    const TensorInfo& t = plan.tensors[size_t(id)];
    TensorSpec s{t.name, t.shape, t.elements()};
    s.dtype = dtype_name(t.dtype);
    s.batchAxis = t.batch_axis();
    s.elementBytes = dtype_size(t.dtype);
    return s;
  };
  for (const Plan& p : profiles) {
    impl_->inputs.emplace_back();
    impl_->outputs.emplace_back();
    for (int32_t id : p.inputs) impl_->inputs.back().push_back(spec(p, id));
    for (int32_t id : p.outputs) impl_->outputs.back().push_back(spec(p, id));
  }
  impl_->active = 0;
  impl_->maxBatch = maxBatch;
  impl_->file = std::move(file);
  return true;
}

bool Runtime::check_inputs(const std::vector<std::vector<int64_t>>& shapes, const float* const* data, int64_t* batch,
                           RtError* err) {
  return check_inputs(shapes, std::vector<std::string>(shapes.size(), "float32"), data, batch, err);
}

bool Runtime::select_profile(const std::vector<std::vector<int64_t>>& shapes, RtError* err) {
  const size_t P = impl_->inputs.size();
  if (P <= 1) return true;  // one profile: check_inputs names the input that differs
  for (size_t p = 0; p < P; ++p) {
    const auto& ins = impl_->inputs[p];
    bool match = shapes.size() == ins.size();
    for (size_t i = 0; match && i < ins.size(); ++i) {
      const std::vector<int64_t> want = ins[i].wire_shape(-1);
      match = shapes[i].size() == want.size() && std::equal(want.begin() + 1, want.end(), shapes[i].begin() + 1);
    }
    if (match) {
      impl_->active = p;
      return true;
    }
  }
  std::string got, list;
  for (size_t i = 0; i < shapes.size(); ++i)
    got += (i ? ", " : "") + (i < impl_->inputs[0].size() ? impl_->inputs[0][i].name + " " : std::string()) + shape_text(shapes[i]);
  for (size_t p = 0; p < P; ++p) list += (p ? "; " : "") + profile_text(p);
  set_err(err, int(ErrorCode::kShapeMismatch),
          "inputs " + got + " match none of the plan's " + std::to_string(P) + " shape profiles (" + list +
              "; N = any batch): recompile with a --profile for these shapes");
  if (err) err->details = {{"got", got}, {"profiles", list}};
  return false;
}

bool Runtime::check_inputs(const std::vector<std::vector<int64_t>>& shapes, const std::vector<std::string>& dtypes,
                           const float* const* data, int64_t* batch, RtError* err) {
  if (!impl_->file) return set_err(err, int(ErrorCode::kInvalidArgument), "no model loaded: send a `load` task first");
  if (!select_profile(shapes, err)) return false;
  const auto& ins = impl_->inputs[impl_->active];
  if (shapes.size() != ins.size() || dtypes.size() != shapes.size()) {
    set_err(err, int(ErrorCode::kShapeMismatch), "expected " + std::to_string(ins.size()) + " input tensor(s), got " +
                                                     std::to_string(shapes.size()));
    if (err) err->details = {{"expected", int64_t(ins.size())}, {"got", int64_t(shapes.size())}};
    return false;
  }
  int64_t n = -1;
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto& got = shapes[i];
    const int64_t gn = got.empty() ? -1 : got[0];
    const std::vector<int64_t> want = ins[i].wire_shape(n >= 0 ? n : gn);
    const bool ok = got == want && gn >= 1;
    if (!ok || dtypes[i] != ins[i].dtype) {
      std::vector<int64_t> expected = ins[i].wire_shape(n >= 0 ? n : -1);
      set_err(err, int(ErrorCode::kShapeMismatch), "input '" + ins[i].name + "': expected " + ins[i].dtype + " " +
                                                       shape_text(expected) + " (batch first, -1 = batch), got " + dtypes[i] +
                                                       " " + shape_text(got));
      if (err) err->details = {{"tensor", ins[i].name}, {"expected", expected}, {"got", got},
                               {"expectedDtype", ins[i].dtype}, {"gotDtype", dtypes[i]}};
      return false;
    }
    n = gn;
  }
  if (n > impl_->maxBatch) {
    set_err(err, int(ErrorCode::kShapeMismatch), "batch " + std::to_string(n) + " exceeds maxBatch " +
                                                     std::to_string(impl_->maxBatch) + " given at load");
    if (err) err->details = {{"maxBatch", impl_->maxBatch}, {"got", n}};
    return false;
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].dtype != "float32") continue;
    const int64_t count = n * ins[i].elementsPerSample;
    const float* p = data[i];
    for (int64_t k = 0; k < count; ++k) {
      if (std::isnan(p[k])) {
        set_err(err, int(ErrorCode::kNanInput), "input '" + ins[i].name + "' holds NaN at flat index " + std::to_string(k));
        if (err) err->details = {{"tensor", ins[i].name}, {"index", k}};
        return false;
      }
    }
  }
  *batch = n;
  return true;
}

std::vector<int64_t> TensorSpec::wire_shape(int64_t n) const {
  std::vector<int64_t> s{n};
  for (size_t i = 0; i < shape.size(); ++i)
    if (int(i) != batchAxis) s.push_back(shape[i]);
  return s;
}

void move_batch_axis(const void* src, void* dst, int64_t n, const TensorSpec& t, bool toPlan) {
  int64_t pre = 1, post = int64_t(t.elementBytes);
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (int(i) < t.batchAxis) pre *= t.shape[i];
    else if (int(i) > t.batchAxis) post *= t.shape[i];
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  // wire [n][pre][post] <-> plan [pre][n][post]
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < pre; ++p) {
      const int64_t w = (i * pre + p) * post, q = (p * n + i) * post;
      std::memcpy(toPlan ? d + q : d + w, toPlan ? s + w : s + q, size_t(post));
    }
}

bool Runtime::run(const std::vector<std::vector<int64_t>>& shapes, const float* const* inputs, float* const* outputs,
                  RtError* err) {
  int64_t batch = 0;
  if (!check_inputs(shapes, inputs, &batch, err)) return false;
  return run_unchecked(batch, inputs, outputs, err);
}

bool Runtime::run_unchecked(int64_t batch, const float* const* inputs, float* const* outputs, RtError* err) {
  if (!impl_->file) return set_err(err, int(ErrorCode::kInvalidArgument), "no model loaded: send a `load` task first");
  std::string msg;
  Status st = impl_->backend().run(batch, inputs, outputs, &msg);
  if (st != Status::kOk) return set_err(err, code_for(st), msg);
  return true;
}

bool Runtime::submit_unchecked(int64_t batch, const float* const* inputs, float* const* outputs,
                               std::function<void()> done, RtError* err) {
  if (!impl_->file) return set_err(err, int(ErrorCode::kInvalidArgument), "no model loaded: send a `load` task first");
  std::string msg;
  DoneFn fn;
  if (done) fn = [d = std::move(done)](Status, const std::string&) { d(); };
  Status st = impl_->backend().submit(batch, inputs, outputs, std::move(fn), &msg);
  if (st != Status::kOk) return set_err(err, code_for(st), msg);
  return true;
}

bool Runtime::drain(RtError* err) {
  std::string msg;
  for (const auto& b : impl_->backends) {
    Status st = b->drain(&msg);
    if (st != Status::kOk) return set_err(err, code_for(st), msg);
  }
  return true;
}

int Runtime::max_in_flight() const { return impl_->backend().max_in_flight(); }
std::string Runtime::notes() const {
  const std::string n = impl_->backends[0]->notes();
  return impl_->fallback.empty() ? n : n.empty() ? impl_->fallback : impl_->fallback + "; " + n;
}

bool Runtime::set_profiling(bool on, RtError* err) {
  if (!impl_->file) return set_err(err, int(ErrorCode::kInvalidArgument), "set_profiling: no plan loaded");
  for (const auto& b : impl_->backends)
    if (!b->set_profiling(on))
      return set_err(err, int(ErrorCode::kUnsupportedOp), std::string("per-op profiling: the ") + b->name() + " backend cannot time its ops");
  return true;
}

OpProfile Runtime::op_profile() const { return impl_->backend().op_profile(); }

RuntimeMemory Runtime::memory() const {
  RuntimeMemory m;
  MemoryStats s = impl_->backends[0]->memory_stats();
  m.arenaBytes = s.arenaBytes;
  m.weightsBytesHost = s.weightBytesHost;
  m.weightsBytesDevice = s.weightBytesDevice;
  m.workspaceBytes = s.workspaceBytes;
  m.deviceUsedBytes = s.deviceUsedBytes;
  m.weightsBytesReleased = s.weightBytesReleased;
  m.batchTailBytesPerSample = s.batchTailBytesPerSample;
  m.arenaUnwrittenBytesPerSample = s.arenaUnwrittenBytesPerSample;
  m.workspaceBytesByBatch = s.workspaceBytesByBatch;
  m.batchTailUnwrittenBytesPerSample = s.batchTailUnwrittenBytesPerSample;
  m.batchTailWorkspaceBytesByBatch = s.batchTailWorkspaceBytesByBatch;
  // Profiles share one host arena and workspace: the largest of them is what is held.
  for (size_t p = 1; p < impl_->backends.size(); ++p) {
    const MemoryStats o = impl_->backends[p]->memory_stats();
    m.arenaBytes = std::max(m.arenaBytes, o.arenaBytes);
    m.workspaceBytes = std::max(m.workspaceBytes, o.workspaceBytes);
    // Each profile's backend repacks and releases the same plan weights.
    m.weightsBytesReleased = std::max(m.weightsBytesReleased, o.weightBytesReleased);
    m.batchTailBytesPerSample = std::max(m.batchTailBytesPerSample, o.batchTailBytesPerSample);
    // Each profile lays its arena out its own way: the smallest figure holds whichever one runs.
    m.arenaUnwrittenBytesPerSample = std::min(m.arenaUnwrittenBytesPerSample, o.arenaUnwrittenBytesPerSample);
    if (m.workspaceBytesByBatch.size() < o.workspaceBytesByBatch.size()) m.workspaceBytesByBatch.resize(o.workspaceBytesByBatch.size());
    for (size_t i = 0; i < o.workspaceBytesByBatch.size(); ++i)
      m.workspaceBytesByBatch[i] = std::max(m.workspaceBytesByBatch[i], o.workspaceBytesByBatch[i]);
    m.batchTailUnwrittenBytesPerSample = std::min(m.batchTailUnwrittenBytesPerSample, o.batchTailUnwrittenBytesPerSample);
    if (m.batchTailWorkspaceBytesByBatch.size() < o.batchTailWorkspaceBytesByBatch.size())
      m.batchTailWorkspaceBytesByBatch.resize(o.batchTailWorkspaceBytesByBatch.size());
    for (size_t i = 0; i < o.batchTailWorkspaceBytesByBatch.size(); ++i)
      m.batchTailWorkspaceBytesByBatch[i] = std::max(m.batchTailWorkspaceBytesByBatch[i], o.batchTailWorkspaceBytesByBatch[i]);
  }
  if (impl_->file) {
    m.weightsBytes = distinct_weight_bytes(impl_->file->profiles());
    m.planFileBytes = impl_->file->mapping_bytes();
  }
  return m;
}

std::string blas_version() {
  // openblas_get_config() reads e.g. "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... Cooperlake ..."
  std::string v = "OpenBLAS";
  if (const char* cfg = openblas_get_config()) v = cfg;
  const size_t b = v.find_first_not_of(' '), e = v.find_last_not_of(' ');
  return b == std::string::npos ? v : v.substr(b, e - b + 1);
}

bool cuda_built() {
#ifdef MEMLANE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace memlane
