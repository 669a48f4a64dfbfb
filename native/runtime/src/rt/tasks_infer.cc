// `infer.native`: the phases of docs/worker-tasks.md, latency per batch size measured around
// the runtime's own call, and the outputs for the whole eval set in one float32 frame.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "rt/io_binding.h"
#include "rt/task_ctx.h"
#include "rt/task_profile.h"

namespace memlane::rt {
namespace {

using protocol::ErrorCode;
namespace ph = protocol::phase;

double percentile(std::vector<double> v, double q) {  // numpy's default (linear)
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

// RAII phase mark: start now, end on scope exit (also when a TaskError unwinds).
class Phase {
 public:
  Phase(const TaskCtx& c, const char* name, const Runtime* rt = nullptr) : c_(c), name_(name), rt_(rt) {
    c_.phase(name_, true);
  }
  ~Phase() { c_.phase(name_, false, nullptr, -1, gpu_kib()); }
  void set_runtime(const Runtime* rt) { rt_ = rt; }

 private:
  int64_t gpu_kib() const {
    if (!rt_) return -1;
    const int64_t b = rt_->memory().deviceUsedBytes;
    return b >= 0 ? b / 1024 : -1;
  }
  const TaskCtx& c_;
  const char* name_;
  const Runtime* rt_;
};


// Waits for every submitted request on scope exit, also when a TaskError unwinds.
struct DrainOnExit {
  Runtime* rt;
  ~DrainOnExit() {
    RtError ignored;
    rt->drain(&ignored);
  }
};

}  // namespace

RuntimeOptions runtime_options(const TaskCtx& c, std::string* device) {
  RuntimeOptions o;
  o.device = c.str_arg("device", c.info().device.c_str());
  if (o.device != "cpu" && o.device != "cuda" && o.device != "auto") c.bad_arg("device", "\"cpu\", \"cuda\" or \"auto\"", "\"" + o.device + "\"");
  o.threads = int(c.int_arg("threads", c.info().threads, 0, 1024));
  // CUDA switches: args.variant and every scalar in args.cuda pass through as strings.
  if (const Obj* v = c.arg("variant")) {
    std::string s;
    if (as_str(*v, &s)) o.switches["variant"] = s;
  }
  if (const Obj* m = c.arg("cuda"); m && m->type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < m->via.map.size; ++i) {
      const auto& kv = m->via.map.ptr[i];
      std::string k, s;
      int64_t n;
      if (!as_str(kv.key, &k)) continue;
      if (as_str(kv.val, &s)) o.switches[k] = s;
      else if (kv.val.type == msgpack::type::BOOLEAN) o.switches[k] = kv.val.via.boolean ? "true" : "false";
      else if (as_int(kv.val, &n)) o.switches[k] = std::to_string(n);
    }
  }
  o.phaseMark = [&c](const char* name, bool start) { c.phase(name, start); };
  *device = o.device;
  return o;
}

void task_infer_native(TaskCtx& c) {
  // import: process start to hello (nothing is imported lazily in a native binary)
  // (start: nothing mapped yet, the zero reading and an empty summary).
  const MemoryReading zero;
  const SmapsSummary none;
  c.phase(ph::kImport, true, &zero, c.info().startMs, -1, &none);
  c.phase(ph::kImport, false, &c.info().atHello, c.info().helloMs, -1, &c.info().atHelloSmaps);

  const std::string model = c.str_arg("model");
  const auto batchSizes = c.int_list_arg("batchSizes", {1, 64}, 1, 1 << 20);
  const int64_t iterations = c.int_arg("iterations", 20, 1);
  const int64_t warmup = c.int_arg("warmup", 3, 0);
  if (c.tensors().empty()) {
    Val d = Val::map();
    d.set("tensor", "inputs");
    throw TaskError{int(ErrorCode::kInvalidArgument), "infer.native: the task carries no input tensors (`input:<name>` per graph input, or the legacy `inputs`)", d};
  }
  const int64_t maxBatch = *std::max_element(batchSizes.begin(), batchSizes.end());

  std::string device;
  RuntimeOptions ro = runtime_options(c, &device);
  std::unique_ptr<Runtime> rt;
  RtError err;
  {
    Phase p(c, ph::kRuntimeCreate);
    rt = Runtime::create(ro, &err);
    if (!rt) throw_rt_error(err);
    p.set_runtime(rt.get());
  }
  {
    Phase p(c, ph::kModelLoad, rt.get());
    if (!rt->load(model, maxBatch, &err)) throw_rt_error(err);
  }
  // Every graph input fed (shapes and dtypes the plan's, batch first on the wire), no NaN.
  const IoBinding io = bind_inputs(c, *rt);
  const int64_t N = io.rows;
  // Requests in flight at once when submitted asynchronously: the CPU backend 1, the CUDA
  // backend 2 per context (its "overlap", "asyncOutputs" and "contexts" switches act only
  // there). Off by default where nothing could overlap; `pipelined: true` forces it.
  const int inFlight = std::max(1, rt->max_in_flight());
  const bool pipelined = c.bool_arg("pipelined", inFlight > 1);
  // Batches: the first n rows of the eval set in the plan's layout, read in place where the
  // batch is the first axis and the eval set is large enough; copied (tiled, axis moved) otherwise.
  std::vector<std::vector<uint64_t>> batchStore;
  std::vector<std::vector<const float*>> batchData;
  for (size_t i = 0; i < batchSizes.size(); ++i) batchData.push_back(plan_inputs(io, *rt, 0, batchSizes[i], batchStore));
  // The whole eval set's outputs, batch first on the wire: the legacy form sends the first
  // graph output as "outputs", the io form every output as "output:<name>". Left unwritten
  // until a call writes them (malloc maps a large frame lazily).
  const size_t nOut = io.legacy ? 1 : rt->outputs().size();
  std::vector<zmq::message_t> frames;
  for (size_t o = 0; o < nOut; ++o) {
    const TensorSpec& spec = rt->outputs()[o];
    frames.emplace_back(size_t(N * spec.elementsPerSample) * spec.elementBytes);
  }
  // Output buffers of the timed loops (their contents are discarded): one set per request
  // in flight, used in rotation, so no two requests write the same memory. The first set
  // writes into the eval frames where a frame holds the largest batch with the batch first
  // (the eval pass overwrites them after): a buffer of its own would be one more largest
  // batch of outputs held to the end (a GPT-2 base at batch 8: 119 MiB of logits).
  // The others are left uninitialized: a request writes the rows of its batch, so only the
  // largest batch's calls (steady-inference) make all of a buffer resident. Zeroed, every
  // buffer was resident before the first inference (a small GPT-2 export at batch 1 and 64:
  // its 31 MiB of logits buffer in first-inference).
  std::vector<std::unique_ptr<uint64_t[]>> outStore;  // one buffer per (set, output), 8-byte aligned
  auto ownBuffer = [&](const TensorSpec& spec) {  // the largest batch of one output, uninitialized
    const size_t words = (size_t(maxBatch * spec.elementsPerSample) * spec.elementBytes + 7) / 8;
    return reinterpret_cast<float*>(outStore.emplace_back(new uint64_t[words]).get());
  };
  std::vector<std::vector<float*>> outSets(static_cast<size_t>(inFlight));
  for (size_t s = 0; s < outSets.size(); ++s)
    for (size_t o = 0; o < rt->outputs().size(); ++o) {
      const TensorSpec& spec = rt->outputs()[o];
      if (s == 0 && o < nOut && spec.batchAxis == 0 && N >= maxBatch)
        outSets[s].push_back(static_cast<float*>(frames[o].data()));
      else
        outSets[s].push_back(ownBuffer(spec));
    }
  auto call = [&](size_t i) {
    if (!rt->run_unchecked(batchSizes[i], batchData[i].data(), outSets[0].data(), &err)) throw_rt_error(err);
  };
  // `iterations` requests submitted back to back, then drained: the time per request when
  // the next one's upload and launch need not wait for the previous one's outputs.
  auto pipelinedMs = [&](size_t i) {
    const float* const* p = batchData[i].data();
    DrainOnExit guard{rt.get()};  // a cancel or failure mid-loop: nothing may still write into outSets
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t it = 0; it < iterations; ++it) {
      c.check_cancel();
      if (!rt->submit_unchecked(batchSizes[i], p, outSets[size_t(it % inFlight)].data(), nullptr, &err)) throw_rt_error(err);
    }
    if (!rt->drain(&err)) throw_rt_error(err);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / double(iterations);
  };
  {
    Phase p(c, ph::kFirstInference, rt.get());
    call(0);
  }
  Val latency = Val::map();
  double largestMean = 0, largestPipelined = 0;
  size_t largestIdx = 0;
  for (size_t i = 0; i < batchSizes.size(); ++i)
    if (batchSizes[i] == maxBatch) largestIdx = i;
  {
    Phase p(c, ph::kSteadyInference, rt.get());
    const int64_t total = int64_t(batchSizes.size()) * iterations;
    int64_t done = 0;
    for (size_t i = 0; i < batchSizes.size(); ++i) {
      for (int64_t w = 0; w < warmup; ++w) {
        c.check_cancel();
        call(i);
      }
      std::vector<double> times(static_cast<size_t>(iterations));
      for (int64_t it = 0; it < iterations; ++it) {
        c.check_cancel();
        const auto t0 = std::chrono::steady_clock::now();
        call(i);
        times[size_t(it)] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
      done += iterations;
      double mean = 0;
      for (double t : times) mean += t;
      mean /= double(times.size());
      Val row = Val::map();
      row.set("p50", percentile(times, 50)).set("p99", percentile(times, 99)).set("mean", mean);
      Val metrics = Val::map();
      metrics.set("p50", percentile(times, 50)).set("p99", percentile(times, 99)).set("mean", mean);
      if (pipelined) {
        const double pm = pipelinedMs(i);
        row.set("pipelinedMean", pm);
        metrics.set("pipelinedMean", pm);
        if (i == largestIdx) largestPipelined = pm;
      }
      latency.set("batch" + std::to_string(batchSizes[i]), std::move(row));
      if (i == largestIdx) largestMean = mean;
      c.progress(done, total, "batch " + std::to_string(batchSizes[i]), std::move(metrics));
    }
    // Outputs for the whole eval set in chunks of the largest batch, written straight into the
    // frames where the batch is the output's first axis, else moved there from outSets[0].
    for (int64_t s = 0; s < N; s += maxBatch) {
      c.check_cancel();
      const int64_t n = std::min(maxBatch, N - s);
      std::vector<std::vector<uint64_t>> chunkStore;
      const std::vector<const float*> src = plan_inputs(io, *rt, s, n, chunkStore);
      std::vector<float*> outs = outSets[0];
      for (size_t o = 0; o < nOut; ++o) {
        const TensorSpec& spec = rt->outputs()[o];
        if (spec.batchAxis == 0)
          outs[o] = reinterpret_cast<float*>(static_cast<uint8_t*>(frames[o].data()) + size_t(s * spec.elementsPerSample) * spec.elementBytes);
      }
      if (!rt->run_unchecked(n, src.data(), outs.data(), &err)) throw_rt_error(err);
      for (size_t o = 0; o < nOut; ++o) {
        const TensorSpec& spec = rt->outputs()[o];
        if (spec.batchAxis != 0)
          move_batch_axis(outs[o], static_cast<uint8_t*>(frames[o].data()) + size_t(s * spec.elementsPerSample) * spec.elementBytes, n, spec, false);
      }
    }
  }
  // After steady-inference (its marks are taken): per-op timing in calls of its own, into
  // buffers of their own where the timed calls wrote into the (now complete) eval frames.
  if (c.bool_arg("profile", false))
    for (size_t o = 0; o < nOut; ++o)
      if (outSets[0][o] == static_cast<float*>(frames[o].data())) outSets[0][o] = ownBuffer(rt->outputs()[o]);
  std::optional<Val> profile = profile_ops(c, *rt, batchSizes, iterations, call);
  const RuntimeMemory mem = rt->memory();
  Val value = Val::map();
  value.set("latencyMs", std::move(latency))
      .set("throughputPerS", largestMean > 0 ? double(maxBatch) / (largestMean / 1000.0) : 0.0)
      .set("pipelinedThroughputPerS", largestPipelined > 0 ? Val(double(maxBatch) / (largestPipelined / 1000.0)) : Val())
      .set("device", rt->device())
      .set("maxInFlight", int64_t(inFlight))
      .set("backendNotes", rt->notes())
      .set("threads", int64_t(ro.threads))
      .set("arenaBytes", mem.arenaBytes)
      .set("weightsBytes", mem.weightsBytes)
      .set("workspaceBytes", mem.workspaceBytes)
      .set("planBytes", mem.planFileBytes);
  if (profile) value.set("profile", std::move(*profile));
  Val refs = Val::array();
  for (size_t o = 0; o < nOut; ++o) {
    const TensorSpec& spec = rt->outputs()[o];
    Val ref = Val::map();
    ref.set("name", output_name(io, spec)).set("dtype", spec.dtype).set("shape", Val(spec.wire_shape(N))).set("frame", int64_t(o));
    refs.push(std::move(ref));
  }
  c.result(std::move(value), std::move(refs), std::move(frames));
}

}  // namespace memlane::rt
