#include "rt/io_binding.h"

#include <cmath>
#include <cstring>

namespace memlane::rt {
namespace {

using protocol::ErrorCode;

std::string text(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

[[noreturn]] void mismatch(const std::string& msg, const std::string& tensor) {
  Val d = Val::map();
  d.set("tensor", tensor);
  throw TaskError{int(ErrorCode::kShapeMismatch), msg, d};
}

// args.io, when given, must describe the plan's inputs: same names, dtypes and shapes.
void check_io_arg(const TaskCtx& c, const Runtime& rt) {
  const Obj* io = c.arg("io");
  if (!io || io->type == msgpack::type::NIL) return;
  const Obj* ins = io->type == msgpack::type::MAP ? get(io, "inputs") : nullptr;
  if (!ins || ins->type != msgpack::type::ARRAY) c.bad_arg("io", "a map {inputs: [IoSpec], outputs: [IoSpec]}", type_of(*io));
  for (uint32_t i = 0; i < ins->via.array.size; ++i) {
    const Obj& spec = ins->via.array.ptr[i];
    std::string name, dtype;
    std::vector<int64_t> shape;
    const Obj *n = get(&spec, "name"), *d = get(&spec, "dtype"), *s = get(&spec, "shape");
    if (!n || !as_str(*n, &name)) c.bad_arg("io.inputs[" + std::to_string(i) + "].name", "a string", "nothing");
    // Names and dtypes are the same in every profile; the shape must be one profile's.
    const TensorSpec* p = nullptr;
    std::string shapes;
    bool shape_known = false;
    for (size_t k = 0; k < rt.profile_count(); ++k)
      for (const auto& t : rt.profile_inputs(k))
        if (t.name == name) {
          p = &t;
          shapes += (shapes.empty() ? "" : " or ") + text(t.shape);
          if (s && as_int_list(*s, &shape) && shape == t.shape) shape_known = true;
        }
    if (!p) mismatch(c.task() + ": args.io names input '" + name + "', which the plan does not have (compiled for a different model?)", name);
    if (d && as_str(*d, &dtype) && dtype != p->dtype)
      mismatch(c.task() + ": input '" + name + "': the plan takes " + p->dtype + ", args.io says " + dtype, name);
    if (s && as_int_list(*s, &shape) && !shape_known)
      mismatch(c.task() + ": input '" + name + "': the plan was compiled for shape " + shapes + ", args.io says " +
                   text(shape) + " (recompile with these inputShapes)", name);
  }
}

}  // namespace

IoBinding bind_inputs(const TaskCtx& c, Runtime& rt) {
  check_io_arg(c, rt);
  IoBinding b;
  const auto& ins = rt.inputs();
  const InTensor* legacy = c.tensor("inputs");
  b.legacy = legacy && !c.tensor("input:" + ins[0].name);
  if (b.legacy) {
    if (ins.size() != 1)
      throw TaskError{int(ErrorCode::kInvalidArgument), c.task() + ": the plan has " + std::to_string(ins.size()) +
                                                            " inputs; send one `input:<name>` tensor each instead of `inputs`"};
    b.inputs.push_back(legacy);
  } else {
    for (const auto& t : ins) {
      const InTensor* x = c.tensor("input:" + t.name);
      if (!x) {
        Val d = Val::map();
        d.set("tensor", "input:" + t.name);
        throw TaskError{int(ErrorCode::kInvalidArgument), c.task() + ": the task carries no `input:" + t.name + "` tensor (graph input '" +
                                                              t.name + "', " + t.dtype + " " + text(t.wire_shape(-1)) + ")", d};
      }
      b.inputs.push_back(x);
    }
  }
  // Shapes and dtypes against the plan with one row (the eval set may exceed maxBatch).
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  std::vector<const float*> data;
  for (size_t i = 0; i < ins.size(); ++i) {
    const InTensor* t = b.inputs[i];
    if (t->shape.empty() || t->shape[0] < 1)
      mismatch(c.task() + ": input '" + ins[i].name + "' must be [N, ...] with N >= 1, got " + text(t->shape), ins[i].name);
    if (i > 0 && t->shape[0] != b.rows)
      mismatch(c.task() + ": input '" + ins[i].name + "' has " + std::to_string(t->shape[0]) + " rows, '" + ins[0].name + "' has " +
                   std::to_string(b.rows) + "; every input needs the same number", ins[i].name);
    b.rows = t->shape[0];
    shapes.push_back(t->shape);
    shapes.back()[0] = 1;
    dtypes.push_back(t->dtype);
    data.push_back(t->data);
  }
  int64_t one;
  RtError err;
  if (!rt.check_inputs(shapes, dtypes, data.data(), &one, &err)) throw_rt_error(err);
  for (size_t i = 0; i < ins.size(); ++i) {
    const InTensor* t = b.inputs[i];
    if (t->dtype != "float32") continue;
    for (int64_t k = 0; k < t->count; ++k)
      if (std::isnan(t->data[k])) {
        Val d = Val::map();
        d.set("tensor", ins[i].name).set("index", k);
        throw TaskError{int(ErrorCode::kNanInput), "input '" + ins[i].name + "' holds NaN at flat index " + std::to_string(k), d};
      }
  }
  return b;
}

std::vector<const float*> plan_inputs(const IoBinding& b, const Runtime& rt, int64_t r0, int64_t n,
                                      std::vector<std::vector<uint64_t>>& store) {
  std::vector<const float*> out;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const InTensor* t = b.inputs[i];
    const TensorSpec& s = rt.inputs()[i];
    const size_t row = size_t(s.elementsPerSample) * s.elementBytes;
    const auto* src = reinterpret_cast<const uint8_t*>(t->data);
    if (s.batchAxis == 0 && r0 + n <= b.rows) {
      out.push_back(reinterpret_cast<const float*>(src + size_t(r0) * row));
      continue;
    }
    std::vector<uint64_t> wire((size_t(n) * row + 7) / 8);
    auto* w = reinterpret_cast<uint8_t*>(wire.data());
    for (int64_t r = 0; r < n; ++r) std::memcpy(w + size_t(r) * row, src + size_t((r0 + r) % b.rows) * row, row);
    if (s.batchAxis != 0) {
      std::vector<uint64_t> planned(wire.size());
      move_batch_axis(wire.data(), planned.data(), n, s, true);
      wire.swap(planned);
    }
    store.push_back(std::move(wire));
    out.push_back(reinterpret_cast<const float*>(store.back().data()));
  }
  return out;
}

}  // namespace memlane::rt
