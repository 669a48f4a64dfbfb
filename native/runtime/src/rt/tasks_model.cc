// `load` (keep one model loaded for later `run` tasks) and `run` (one checked batch).
#include <cstring>

#include "rt/io_binding.h"
#include "rt/task_ctx.h"

namespace memlane::rt {

namespace {

using protocol::ErrorCode;
namespace ph = protocol::phase;


Val specs(const std::vector<TensorSpec>& ts) {
  Val a = Val::array();
  for (const auto& t : ts) {
    Val m = Val::map();
    m.set("name", t.name).set("shape", Val(t.shape)).set("dtype", t.dtype).set("batchAxis", int64_t(t.batchAxis));
    a.push(std::move(m));
  }
  return a;
}

Val bytes_curve(const std::vector<uint64_t>& v) {
  Val a = Val::array();
  for (uint64_t b : v) a.push(Val(b));
  return a;
}

}  // namespace

void task_load(TaskCtx& c, WorkerState& state) {
  const std::string model = c.str_arg("model");
  const int64_t maxBatch = c.int_arg("maxBatch", 64, 1, 1 << 20);
  std::string device;
  RuntimeOptions ro = runtime_options(c, &device);
  state.loaded.reset();  // a new load replaces the model (and frees its arena) first
  RtError err;
  c.phase(ph::kRuntimeCreate, true);
  std::unique_ptr<Runtime> rt = Runtime::create(ro, &err);
  c.phase(ph::kRuntimeCreate, false);
  if (!rt) throw_rt_error(err);
  c.phase(ph::kModelLoad, true);
  const bool ok = rt->load(model, maxBatch, &err);
  c.phase(ph::kModelLoad, false);
  if (!ok) throw_rt_error(err);
  const RuntimeMemory m = rt->memory();
  Val v = Val::map();
  v.set("arenaBytes", m.arenaBytes)
      .set("weightsBytes", m.weightsBytes)
      .set("device", rt->device())
      .set("maxBatch", maxBatch)
      .set("workspaceBytes", m.workspaceBytes)
      .set("weightsBytesReleased", m.weightsBytesReleased)
      .set("batchTailBytesPerSample", m.batchTailBytesPerSample)
      .set("arenaUnwrittenBytesPerSample", m.arenaUnwrittenBytesPerSample)
      .set("workspaceBytesByBatch", bytes_curve(m.workspaceBytesByBatch))
      .set("batchTailUnwrittenBytesPerSample", m.batchTailUnwrittenBytesPerSample)
      .set("batchTailWorkspaceBytesByBatch", bytes_curve(m.batchTailWorkspaceBytesByBatch))
      .set("inputs", specs(rt->inputs()))
      .set("outputs", specs(rt->outputs()));
  // Every shape profile's inputs (one entry for a one-profile plan); `inputs` is profile 0's.
  Val profiles = Val::array();
  for (size_t p = 0; p < rt->profile_count(); ++p) profiles.push(specs(rt->profile_inputs(p)));
  v.set("profiles", std::move(profiles));
  state.loaded = std::move(rt);
  c.result(std::move(v), Val(), {});
}

void task_run(TaskCtx& c, WorkerState& state) {
  if (!state.loaded)
    throw TaskError{int(ErrorCode::kInvalidArgument), "run: no model loaded; send a `load` task first"};
  Runtime& rt = *state.loaded;
  auto& given = c.tensors();
  const auto& ins = rt.inputs();
  // Match the plan's inputs by `input:<name>`, by name, or (unnamed refs of the right count) by position.
  IoBinding io;
  bool prefixed = false;
  for (size_t i = 0; i < ins.size(); ++i) {
    const InTensor* t = c.tensor("input:" + ins[i].name);
    prefixed = prefixed || t;
    if (!t) t = c.tensor(ins[i].name);
    if (!t && given.size() == ins.size()) t = &given[i];
    if (!t) {
      Val d = Val::map();
      d.set("expected", ins[i].name).set("got", int64_t(given.size()));
      throw TaskError{int(ErrorCode::kShapeMismatch),
                      "run: the plan's input '" + ins[i].name + "' is missing (" + std::to_string(given.size()) +
                          " tensor(s) given, " + std::to_string(ins.size()) + " expected)", d};
    }
    io.inputs.push_back(t);
  }
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  std::vector<const float*> data;
  for (const InTensor* t : io.inputs) {
    shapes.push_back(t->shape);
    dtypes.push_back(t->dtype);
    data.push_back(t->data);
  }
  int64_t batch = 0;
  RtError err;
  if (!rt.check_inputs(shapes, dtypes, data.data(), &batch, &err)) throw_rt_error(err);
  io.rows = batch;
  std::vector<std::vector<uint64_t>> store;
  const std::vector<const float*> planned = plan_inputs(io, rt, 0, batch, store);
  std::vector<zmq::message_t> frames;
  std::vector<std::vector<uint64_t>> scratch(rt.outputs().size());
  std::vector<float*> outs;
  Val refs = Val::array();
  for (size_t i = 0; i < rt.outputs().size(); ++i) {
    const TensorSpec& o = rt.outputs()[i];
    frames.emplace_back(size_t(batch * o.elementsPerSample) * o.elementBytes);
    if (o.batchAxis == 0) outs.push_back(static_cast<float*>(frames.back().data()));
    else {
      scratch[i].resize((frames.back().size() + 7) / 8);
      outs.push_back(reinterpret_cast<float*>(scratch[i].data()));
    }
    Val r = Val::map();
    r.set("name", prefixed ? "output:" + o.name : o.name).set("dtype", o.dtype).set("shape", Val(o.wire_shape(batch))).set("frame", int64_t(i));
    refs.push(std::move(r));
  }
  if (!rt.run_unchecked(batch, planned.data(), outs.data(), &err)) throw_rt_error(err);
  for (size_t i = 0; i < rt.outputs().size(); ++i)
    if (rt.outputs()[i].batchAxis != 0) move_batch_axis(outs[i], frames[i].data(), batch, rt.outputs()[i], false);
  Val v = Val::map();
  v.set("batch", batch).set("device", rt.device());
  c.result(std::move(v), std::move(refs), std::move(frames));
}

}  // namespace memlane::rt
