// Reads a .mlplan: maps the file read-only, validates in the order docs/plan-format.md
// gives, parses the msgpack header into a Plan whose weights point into the mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <map>
#include <msgpack.hpp>
#include <sstream>

#include "core/msgpack_read.h"
#include "plan/plan.h"
#include "plan/plan_format.h"
#include "plan/reader_common.h"

namespace memlane {
namespace {

namespace pf = plan_format;

using plan_reader::Fail;
using plan_reader::Layout;
using plan_reader::fail;
using plan_reader::rd_u32;
using plan_reader::rd_u64;

using Obj = msgpack::object;

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

const Obj* map_get(const Obj& m, const char* key) { return mp::get(&m, key); }
using mp::type_name;

// Typed field access; each failure names the field path.
class Reader {
 public:
  Fail err;
  bool ok = true;

  bool bad(const std::string& field, const std::string& expected, const std::string& found) {
    if (ok) err = fail(field, expected, found);
    ok = false;
    return false;
  }
  const Obj* need(const Obj& m, const char* key, const std::string& path) {
    const Obj* v = map_get(m, key);
    if (!v) bad(path + "." + key, "present", "missing");
    return v;
  }
  bool as_int(const Obj* o, const std::string& path, int64_t* out) {
    if (!o) return false;
    if (o->type == msgpack::type::POSITIVE_INTEGER) {
      if (o->via.u64 > uint64_t(INT64_MAX)) return bad(path, "int64", "larger integer");
      *out = int64_t(o->via.u64);
      return true;
    }
    if (o->type == msgpack::type::NEGATIVE_INTEGER) { *out = o->via.i64; return true; }
    if ((o->type == msgpack::type::FLOAT64 || o->type == msgpack::type::FLOAT32) &&
        o->via.f64 == double(int64_t(o->via.f64))) {
      *out = int64_t(o->via.f64);
      return true;
    }
    return bad(path, "int", type_name(*o));
  }
  bool as_float(const Obj* o, const std::string& path, float* out) {
    if (!o) return false;
    if (o->type == msgpack::type::FLOAT64 || o->type == msgpack::type::FLOAT32) {
      *out = float(o->via.f64);
      return true;
    }
    int64_t i;
    if (o->type == msgpack::type::POSITIVE_INTEGER || o->type == msgpack::type::NEGATIVE_INTEGER) {
      as_int(o, path, &i);
      *out = float(i);
      return ok;
    }
    return bad(path, "number", type_name(*o));
  }
  // A number kept in double precision (int64 values up to 2^53 exactly); absent = def.
  bool as_double(const Obj* o, const std::string& path, double* out, double def) {
    if (!o) { *out = def; return true; }
    if (o->type == msgpack::type::FLOAT64 || o->type == msgpack::type::FLOAT32) { *out = o->via.f64; return true; }
    if (o->type == msgpack::type::POSITIVE_INTEGER) { *out = double(o->via.u64); return true; }
    if (o->type == msgpack::type::NEGATIVE_INTEGER) { *out = double(o->via.i64); return true; }
    return bad(path, "number", type_name(*o));
  }
  bool as_bool(const Obj* o, const std::string& path, bool* out) {
    if (!o) return false;
    if (o->type == msgpack::type::BOOLEAN) { *out = o->via.boolean; return true; }
    int64_t i;
    if (o->type == msgpack::type::POSITIVE_INTEGER || o->type == msgpack::type::NEGATIVE_INTEGER) {
      as_int(o, path, &i);
      *out = i != 0;
      return ok;
    }
    return bad(path, "bool", type_name(*o));
  }
  bool as_str(const Obj* o, const std::string& path, std::string* out) {
    if (!o) return false;
    if (o->type != msgpack::type::STR) return bad(path, "str", type_name(*o));
    out->assign(o->via.str.ptr, o->via.str.size);
    return true;
  }
  bool as_ints(const Obj* o, const std::string& path, std::vector<int64_t>* out) {
    if (!o) return false;
    if (o->type != msgpack::type::ARRAY) return bad(path, "array of int", type_name(*o));
    out->clear();
    for (uint32_t i = 0; i < o->via.array.size; ++i) {
      int64_t v;
      if (!as_int(&o->via.array.ptr[i], path + "[" + std::to_string(i) + "]", &v)) return false;
      out->push_back(v);
    }
    return true;
  }
  // Fixed-length int attribute (e.g. kernel [kh,kw]) into int[n].
  bool ints_n(const Obj& attrs, const char* key, const std::string& path, int* dst, size_t n,
              bool required) {
    const Obj* o = map_get(attrs, key);
    if (!o) return required ? bad(path + "." + key, "present", "missing") : true;
    std::vector<int64_t> v;
    if (!as_ints(o, path + "." + key, &v)) return false;
    if (v.size() != n)
      return bad(path + "." + key, std::to_string(n) + " entries (2-D only in v1)",
                 std::to_string(v.size()) + " entries");
    for (size_t i = 0; i < n; ++i) {
      if (v[i] < INT32_MIN || v[i] > INT32_MAX)
        return bad(path + "." + key, "32-bit int", std::to_string(v[i]));
      dst[i] = int(v[i]);
    }
    return true;
  }
};

bool parse_op_type(const std::string& s, OpType* t) {
  static const struct { const char* n; OpType t; } kTable[] = {
      {"Conv", OpType::kConv}, {"Gemm", OpType::kGemm}, {"MatMul", OpType::kMatMul},
      {"Add", OpType::kAdd}, {"Sub", OpType::kSub}, {"Mul", OpType::kMul}, {"Div", OpType::kDiv},
      {"Relu", OpType::kRelu}, {"LeakyRelu", OpType::kLeakyRelu}, {"Sigmoid", OpType::kSigmoid},
      {"Tanh", OpType::kTanh}, {"Erf", OpType::kErf}, {"Gelu", OpType::kGelu},
      {"MaxPool", OpType::kMaxPool}, {"AveragePool", OpType::kAveragePool},
      {"GlobalAveragePool", OpType::kGlobalAveragePool}, {"Flatten", OpType::kFlatten},
      {"Reshape", OpType::kReshape}, {"Transpose", OpType::kTranspose},
      {"Concat", OpType::kConcat}, {"Softmax", OpType::kSoftmax},
      {"LayerNormalization", OpType::kLayerNorm}, {"Pow", OpType::kPow}, {"Sqrt", OpType::kSqrt},
      {"Reciprocal", OpType::kReciprocal}, {"Exp", OpType::kExp}, {"Neg", OpType::kNeg},
      {"Log", OpType::kLog}, {"Abs", OpType::kAbs}, {"ReduceMean", OpType::kReduceMean},
      {"ReduceSum", OpType::kReduceSum}, {"ReduceMax", OpType::kReduceMax}, {"Attention", OpType::kAttention},
      {"Gather", OpType::kGather}, {"Cast", OpType::kCast}, {"Where", OpType::kWhere}, {"Equal", OpType::kEqual},
      {"Less", OpType::kLess}, {"Greater", OpType::kGreater}, {"Not", OpType::kNot}, {"And", OpType::kAnd},
      {"Or", OpType::kOr}, {"Mod", OpType::kMod}, {"Expand", OpType::kExpand}, {"Slice", OpType::kSlice},
      {"Range", OpType::kRange}, {"ConstantOfShape", OpType::kConstantOfShape},
      {"LessOrEqual", OpType::kLessOrEqual}, {"GreaterOrEqual", OpType::kGreaterOrEqual},
      {"Clip", OpType::kClip}, {"HardSigmoid", OpType::kHardSigmoid}, {"HardSwish", OpType::kHardSwish},
      {"SiLU", OpType::kSiLU}, {"Pad", OpType::kPad}, {"Split", OpType::kSplit}, {"LSTM", OpType::kLSTM},
      {"Max", OpType::kMax}, {"Min", OpType::kMin}, {"GatherND", OpType::kGatherND},
      {"CumSum", OpType::kCumSum}, {"GatherElements", OpType::kGatherElements},
      {"Sin", OpType::kSin}, {"Cos", OpType::kCos}, {"ArgMax", OpType::kArgMax},
      {"Elu", OpType::kElu}, {"Selu", OpType::kSelu}, {"Celu", OpType::kCelu}, {"Softplus", OpType::kSoftplus},
      {"Softsign", OpType::kSoftsign}, {"Mish", OpType::kMish}, {"ThresholdedRelu", OpType::kThresholdedRelu},
      {"Tan", OpType::kTan}, {"Asin", OpType::kAsin}, {"Acos", OpType::kAcos}, {"Atan", OpType::kAtan},
      {"Sinh", OpType::kSinh}, {"Cosh", OpType::kCosh}, {"Asinh", OpType::kAsinh}, {"Acosh", OpType::kAcosh},
      {"Atanh", OpType::kAtanh}, {"PRelu", OpType::kPRelu},
      {"ConvTranspose", OpType::kConvTranspose}, {"LogSoftmax", OpType::kLogSoftmax},
      {"GRU", OpType::kGRU}, {"TopK", OpType::kTopK}};
  for (const auto& e : kTable)
    if (s == e.n) { *t = e.t; return true; }
  return false;
}

bool parse_activation(Reader& r, const Obj& attrs, const std::string& path, Activation* a) {
  const Obj* o = map_get(attrs, "activation");
  if (!o || o->type == msgpack::type::NIL) { *a = Activation::kNone; return true; }
  std::string s;
  if (!r.as_str(o, path + ".activation", &s)) return false;
  if (s == "none") *a = Activation::kNone;
  else if (s == "relu") *a = Activation::kRelu;
  else return r.bad(path + ".activation", "\"none\" or \"relu\"", "\"" + s + "\"");
  return true;
}

// Clip, HardSigmoid, Pad, Split, LSTM (docs/plan-format.md); unknown strings name what was expected.
bool parse_cnn_attrs(Reader& r, const Obj& m, OpType t, const std::string& p, OpAttrs* a) {
  std::string s;
  switch (t) {
    case OpType::kClip:
      if (const Obj* o = map_get(m, "min")) if (!r.as_float(o, p + ".min", &a->clipMin)) return false;
      if (const Obj* o = map_get(m, "max")) if (!r.as_float(o, p + ".max", &a->clipMax)) return false;
      return true;
    case OpType::kHardSigmoid:
      a->alpha = 0.2f;
      a->beta = 0.5f;
      if (const Obj* o = map_get(m, "alpha")) if (!r.as_float(o, p + ".alpha", &a->alpha)) return false;
      if (const Obj* o = map_get(m, "beta")) if (!r.as_float(o, p + ".beta", &a->beta)) return false;
      return true;
    case OpType::kPad:
      if (!r.as_ints(r.need(m, "pads", p), p + ".pads", &a->padsNd)) return false;
      if (const Obj* o = map_get(m, "value")) if (!r.as_float(o, p + ".value", &a->padValue)) return false;
      if (const Obj* o = map_get(m, "mode")) {
        if (!r.as_str(o, p + ".mode", &s)) return false;
        if (s == "constant") a->padMode = PadMode::kConstant;
        else if (s == "reflect") a->padMode = PadMode::kReflect;
        else if (s == "edge") a->padMode = PadMode::kEdge;
        else return r.bad(p + ".mode", "\"constant\", \"reflect\" or \"edge\"", "\"" + s + "\"");
      }
      return true;
    case OpType::kSplit: {
      int64_t v;
      if (!r.as_int(r.need(m, "axis", p), p + ".axis", &v)) return false;
      if (v < 1 || v > 16) return r.bad(p + ".axis", ">= 1 (full rank, batch first)", std::to_string(v));
      a->axis = int(v);
      return r.as_ints(r.need(m, "split", p), p + ".split", &a->split);
    }
    case OpType::kLSTM:
    case OpType::kGRU: {
      int64_t v;
      if (!r.as_int(r.need(m, "hiddenSize", p), p + ".hiddenSize", &v)) return false;
      if (v < 1 || v > INT32_MAX) return r.bad(p + ".hiddenSize", ">= 1", std::to_string(v));
      a->hiddenSize = int(v);
      if (const Obj* o = map_get(m, "layout")) {
        if (!r.as_int(o, p + ".layout", &v)) return false;
        if (v != 0 && v != 1) return r.bad(p + ".layout", "0 or 1", std::to_string(v));
        a->layout = int(v);
      }
      if (const Obj* o = map_get(m, "direction")) {
        if (!r.as_str(o, p + ".direction", &s)) return false;
        if (s == "forward") a->direction = LstmDirection::kForward;
        else if (s == "reverse") a->direction = LstmDirection::kReverse;
        else if (s == "bidirectional") a->direction = LstmDirection::kBidirectional;
        else return r.bad(p + ".direction", "\"forward\", \"reverse\" or \"bidirectional\"", "\"" + s + "\"");
      }
      if (const Obj* o = map_get(m, "linearBeforeReset")) {
        if (t != OpType::kGRU) return r.bad(p + ".linearBeforeReset", "absent (a GRU's attribute)", "present");
        if (!r.as_bool(o, p + ".linearBeforeReset", &a->linearBeforeReset)) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

bool parse_attrs(Reader& r, const Obj* attrs_obj, OpType t, const std::string& path, OpAttrs* a) {
  static const Obj kEmpty;  // NIL: map_get finds nothing
  const Obj& m = attrs_obj ? *attrs_obj : kEmpty;
  if (attrs_obj && m.type != msgpack::type::MAP && m.type != msgpack::type::NIL)
    return r.bad(path, "map", type_name(m));
  const std::string p = path;
  switch (t) {
    case OpType::kConv:
    case OpType::kConvTranspose:
      if (!r.ints_n(m, "kernel", p, a->kernel, 2, true) || !r.ints_n(m, "strides", p, a->strides, 2, false) ||
          !r.ints_n(m, "pads", p, a->pads, 4, false) || !r.ints_n(m, "dilations", p, a->dilations, 2, false))
        return false;
      if (const Obj* g = map_get(m, "group")) {
        int64_t v;
        if (!r.as_int(g, p + ".group", &v)) return false;
        if (v < 1 || v > INT32_MAX) return r.bad(p + ".group", ">= 1", std::to_string(v));
        a->group = int(v);
      }
      if (t == OpType::kConvTranspose) return true;  // no fused activation
      return parse_activation(r, m, p, &a->activation);
    case OpType::kGemm:
      if (const Obj* o = map_get(m, "alpha")) if (!r.as_float(o, p + ".alpha", &a->alpha)) return false;
      if (const Obj* o = map_get(m, "beta")) if (!r.as_float(o, p + ".beta", &a->beta)) return false;
      if (const Obj* o = map_get(m, "transA")) if (!r.as_bool(o, p + ".transA", &a->transA)) return false;
      if (const Obj* o = map_get(m, "transB")) if (!r.as_bool(o, p + ".transB", &a->transB)) return false;
      return parse_activation(r, m, p, &a->activation);
    case OpType::kLeakyRelu:
      a->alpha = 0.01f;
      if (const Obj* o = map_get(m, "alpha")) return r.as_float(o, p + ".alpha", &a->alpha);
      return true;
    case OpType::kElu:
    case OpType::kCelu:
    case OpType::kThresholdedRelu:
      a->alpha = 1.0f;
      if (const Obj* o = map_get(m, "alpha")) return r.as_float(o, p + ".alpha", &a->alpha);
      return true;
    case OpType::kSelu:
      // ONNX's defaults, the float32 values of SELU's constants.
      a->alpha = 1.67326319217681884765625f;
      a->gamma = 1.05070102214813232421875f;
      if (const Obj* o = map_get(m, "alpha")) if (!r.as_float(o, p + ".alpha", &a->alpha)) return false;
      if (const Obj* o = map_get(m, "gamma")) if (!r.as_float(o, p + ".gamma", &a->gamma)) return false;
      return true;
    case OpType::kGelu: {
      const Obj* o = map_get(m, "approximate");
      if (!o) return true;
      std::string s;
      if (!r.as_str(o, p + ".approximate", &s)) return false;
      if (s != "none" && s != "tanh") return r.bad(p + ".approximate", "\"none\" or \"tanh\"", "\"" + s + "\"");
      a->geluTanh = s == "tanh";
      return true;
    }
    case OpType::kMaxPool:
    case OpType::kAveragePool:
      if (!r.ints_n(m, "kernel", p, a->kernel, 2, true) || !r.ints_n(m, "strides", p, a->strides, 2, false) ||
          !r.ints_n(m, "pads", p, a->pads, 4, false) || !r.ints_n(m, "dilations", p, a->dilations, 2, false))
        return false;
      if (const Obj* o = map_get(m, "ceilMode")) if (!r.as_bool(o, p + ".ceilMode", &a->ceilMode)) return false;
      if (const Obj* o = map_get(m, "countIncludePad"))
        if (!r.as_bool(o, p + ".countIncludePad", &a->countIncludePad)) return false;
      return true;
    case OpType::kClip:
    case OpType::kHardSigmoid:
    case OpType::kPad:
    case OpType::kSplit:
    case OpType::kLSTM:
    case OpType::kGRU:
      return parse_cnn_attrs(r, m, t, p, a);
    case OpType::kConcat:
    case OpType::kSoftmax:
    case OpType::kLogSoftmax: {  // any axis but the batch's (the kernel checks that)
      int64_t v;
      if (!r.as_int(r.need(m, "axis", p), p + ".axis", &v)) return false;
      if (v < 0 || v > 16) return r.bad(p + ".axis", "0..16 (full rank)", std::to_string(v));
      a->axis = int(v);
      return true;
    }
    case OpType::kFlatten: {
      int64_t v;
      if (!r.as_int(r.need(m, "axis", p), p + ".axis", &v)) return false;
      if (v < 1 || v > 16) return r.bad(p + ".axis", ">= 1 (full rank, batch first)", std::to_string(v));
      a->axis = int(v);
      return true;
    }
    case OpType::kReshape:
      return r.as_ints(r.need(m, "shape", p), p + ".shape", &a->shape);
    case OpType::kGather:
    case OpType::kGatherElements:
    case OpType::kCumSum:
    case OpType::kArgMax:
    case OpType::kTopK: {
      int64_t v;
      if (!r.as_int(r.need(m, "axis", p), p + ".axis", &v)) return false;
      if (v < 0 || v > 16) return r.bad(p + ".axis", "0..16 (resolved, full rank)", std::to_string(v));
      a->axis = int(v);
      if (t == OpType::kTopK) {
        if (!r.as_int(r.need(m, "k", p), p + ".k", &a->k)) return false;
        if (a->k < 1) return r.bad(p + ".k", ">= 1", std::to_string(a->k));
        if (!r.as_int(r.need(m, "largest", p), p + ".largest", &v)) return false;
        if (v != 0 && v != 1) return r.bad(p + ".largest", "0 or 1", std::to_string(v));
        a->largest = v == 1;
        return true;
      }
      if (t == OpType::kArgMax) {
        if (!r.as_int(r.need(m, "select_last_index", p), p + ".select_last_index", &v)) return false;
        if (v != 0 && v != 1) return r.bad(p + ".select_last_index", "0 or 1", std::to_string(v));
        a->lastIndex = v == 1;
        return true;
      }
      if (t != OpType::kCumSum) return true;
      // CumSum's flags as ONNX has them: 0 or 1, anything else is a corrupt plan, not "true".
      for (auto [key, dst] : {std::pair<const char*, bool*>{"exclusive", &a->exclusive}, {"reverse", &a->reverse}}) {
        if (!r.as_int(r.need(m, key, p), p + "." + key, &v)) return false;
        if (v != 0 && v != 1) return r.bad(p + "." + key, "0 or 1", std::to_string(v));
        *dst = v == 1;
      }
      return true;
    }
    case OpType::kCast: {
      std::string s;
      if (!r.as_str(r.need(m, "to", p), p + ".to", &s)) return false;
      if (!parse_dtype(s, &a->to)) return r.bad(p + ".to", "float32|int64|int32|bool", "\"" + s + "\"");
      return true;
    }
    case OpType::kMod:
      if (const Obj* o = map_get(m, "fmod")) return r.as_bool(o, p + ".fmod", &a->fmod);
      return true;
    case OpType::kSlice:
      if (!r.as_ints(r.need(m, "axes", p), p + ".axes", &a->axes) || !r.as_ints(r.need(m, "starts", p), p + ".starts", &a->starts) ||
          !r.as_ints(r.need(m, "steps", p), p + ".steps", &a->steps))
        return false;
      if (a->starts.size() != a->axes.size() || a->steps.size() != a->axes.size())
        return r.bad(p + ".starts/steps", std::to_string(a->axes.size()) + " entries (one per axis)", std::to_string(a->starts.size()));
      return true;
    case OpType::kConstantOfShape:
      return r.as_double(map_get(m, "value"), p + ".value", &a->value, 0);
    case OpType::kRange:
      return r.as_double(map_get(m, "start"), p + ".start", &a->start, 0) &&
             r.as_double(map_get(m, "delta"), p + ".delta", &a->delta, 1);
    case OpType::kTranspose: {
      std::vector<int64_t> v;
      if (!r.as_ints(r.need(m, "perm", p), p + ".perm", &v)) return false;
      for (int64_t x : v) a->perm.push_back(int(x));
      return true;
    }
    case OpType::kLayerNorm: {
      int64_t v;
      if (!r.as_int(r.need(m, "axis", p), p + ".axis", &v)) return false;
      if (v < 1 || v > 16) return r.bad(p + ".axis", ">= 1 (full rank, batch first)", std::to_string(v));
      a->axis = int(v);
      if (!r.as_float(r.need(m, "epsilon", p), p + ".epsilon", &a->epsilon)) return false;
      if (!(a->epsilon >= 0.f)) return r.bad(p + ".epsilon", ">= 0", std::to_string(a->epsilon));
      return true;
    }
    case OpType::kPow:
      return r.as_float(r.need(m, "exponent", p), p + ".exponent", &a->exponent);
    case OpType::kAttention:
      return r.as_float(r.need(m, "scale", p), p + ".scale", &a->scale);
    case OpType::kReduceMean:
    case OpType::kReduceSum:
    case OpType::kReduceMax: {
      std::vector<int64_t> v;
      if (!r.as_ints(r.need(m, "axes", p), p + ".axes", &v)) return false;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] < 1 || v[i] > 16 || (i && v[i] <= v[i - 1]))
          return r.bad(p + ".axes", "increasing axes >= 1 (full rank, batch first)", std::to_string(v[i]));
        a->axes.push_back(v[i]);
      }
      if (const Obj* o = map_get(m, "keepdims")) if (!r.as_bool(o, p + ".keepdims", &a->keepdims)) return false;
      return true;
    }
    default:
      return true;
  }
}

bool check_range(Reader& r, const std::string& field, uint64_t offset, uint64_t bytes, uint64_t limit,
                 const char* limit_name) {
  if (offset > limit || bytes > limit - offset) {
    std::ostringstream exp, found;
    exp << "offset + bytes <= " << limit_name << " " << limit;
    found << offset << " + " << bytes << " = " << (offset + bytes);
    return r.bad(field, exp.str(), found.str());
  }
  return true;
}

// Dataflow: a plan must compute something, and each output must be written by an op or be
// a plan input; otherwise run() would hand back an arena slot nobody wrote (the empty-ops
// plan of issue 10 "succeeded" that way). The same check and words as src/compiler/
// plan-dataflow.ts, so both readers refuse the same plans with the same message.
Fail check_dataflow(const Plan& plan) {
  if (plan.ops.empty()) return fail("ops", "at least one op", "none (an empty list)");
  std::vector<bool> written(plan.tensors.size(), false);
  for (int32_t id : plan.inputs) written[size_t(id)] = true;
  for (const Op& op : plan.ops)
    for (int32_t id : op.outputs) written[size_t(id)] = true;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const int32_t id = plan.outputs[i];
    if (!written[size_t(id)])
      return fail("outputs[" + std::to_string(i) + "] (" + plan.tensors[size_t(id)].name + ")",
                  "a tensor written by an op or a plan input", "tensor " + std::to_string(id) + ", which nothing writes");
  }
  return {Status::kOk, ""};
}

// The preamble's checks (docs/plan-format.md order); on success the header region and blob.
Fail parse_preamble(const uint8_t* data, size_t size, Layout* out) {
  // 1. size
  if (size < pf::kPreambleBytes) return fail("file length", ">= 64 bytes", std::to_string(size) + " bytes");
  // 2. magic
  if (std::memcmp(data + pf::kOffMagic, pf::kMagic, 8) != 0) {
    std::string found;
    for (int i = 0; i < 8; ++i) {
      char c = char(data[i]);
      found += (c >= 32 && c < 127) ? std::string(1, c) : "\\x" + std::to_string(uint8_t(c));
    }
    return fail("magic", "\"MLRTPLAN\"", "\"" + found + "\"");
  }
  // 3. version
  uint32_t version = rd_u32(data + pf::kOffVersion);
  if (version < pf::kVersionSingle || version > pf::kVersion)
    return fail("version",
                std::to_string(pf::kVersionSingle) + " to " + std::to_string(pf::kVersion) +
                    (version < pf::kVersionSingle ? " (an older plan: recompile it from its ONNX model with this memlane)" : ""),
                version);
  // 4. header range
  uint64_t hoff = rd_u64(data + pf::kOffHeaderOffset), hlen = rd_u64(data + pf::kOffHeaderLength);
  if (hoff != pf::kHeaderOffset) return fail("header offset", pf::kHeaderOffset, hoff);
  if (hlen > size - hoff)
    return fail("header length", "<= " + std::to_string(size - hoff) + " (inside the file)", hlen);
  // 5. header hash
  uint64_t want_hash = rd_u64(data + pf::kOffHeaderHash);
  uint64_t got_hash = pf::fnv1a64(data + hoff, hlen);
  if (want_hash != got_hash) {
    std::ostringstream e, f;
    e << "0x" << std::hex << want_hash << " (header hash field)";
    f << "0x" << std::hex << got_hash << " (FNV-1a 64 of the header bytes)";
    return fail("header hash", e.str(), f.str());
  }
  // 6. blob offset alignment and range
  uint64_t boff = rd_u64(data + pf::kOffBlobOffset), blen = rd_u64(data + pf::kOffBlobLength);
  if (boff % pf::kAlignment != 0) return fail("blob offset", "a multiple of 64", boff);
  if (boff < hoff + hlen) return fail("blob offset", ">= " + std::to_string(hoff + hlen) + " (header end)", boff);
  if (boff > size || blen > size - boff)
    return fail("blob length", "blob offset + length <= file size " + std::to_string(size),
                std::to_string(boff) + " + " + std::to_string(blen));
  // 7. file length field
  uint64_t flen = rd_u64(data + pf::kOffFileLength);
  if (flen != size) return fail("file length", std::to_string(flen) + " (file length field)", std::to_string(size) + " (actual size)");
  if (flen != boff + blen) return fail("file length", "blob offset + blob length = " + std::to_string(boff + blen), flen);
  *out = Layout{version, hoff, hlen, boff, blen};
  return {Status::kOk, ""};
}

// One profile's msgpack header (a whole v2 header region) at [hoff, hoff + hlen).
Fail parse_header(const uint8_t* data, uint64_t hoff, uint64_t hlen, uint64_t boff, uint64_t blen, Plan* plan) {
  msgpack::object_handle oh;
  try {
    // Limits: no container may claim more entries than the header has bytes (msgpack-c
    // would allocate what a corrupt length claims), nesting at most 64 deep.
    oh = mp::unpack_bounded(reinterpret_cast<const char*>(data + hoff), hlen);
  } catch (const std::exception& e) {
    return fail("header", "one msgpack map", std::string("undecodable msgpack (") + e.what() + ")");
  }
  const Obj& h = oh.get();
  Reader r;
  if (h.type != msgpack::type::MAP) return fail("header", "msgpack map", type_name(h));
  plan->blob = data + boff;
  plan->blobBytes = blen;

  if (const Obj* o = map_get(h, "producer")) r.as_str(o, "producer", &plan->producer);
  if (const Obj* o = map_get(h, "source")) if (o->type == msgpack::type::STR) r.as_str(o, "source", &plan->source);
  if (!r.ok) return r.err;

  // arena
  const Obj* arena = r.need(h, "arena", "header");
  if (!r.ok) return r.err;
  int64_t bps = 0, lb = 0, align = 64;
  if (!r.as_int(r.need(*arena, "bytesPerSample", "arena"), "arena.bytesPerSample", &bps)) return r.err;
  if (const Obj* o = map_get(*arena, "lowerBoundPerSample")) r.as_int(o, "arena.lowerBoundPerSample", &lb);
  if (const Obj* o = map_get(*arena, "alignment")) r.as_int(o, "arena.alignment", &align);
  if (const Obj* o = map_get(*arena, "concatInPlace")) r.as_bool(o, "arena.concatInPlace", &plan->concatInPlace);
  if (!r.ok) return r.err;
  if (bps < 0) return fail("arena.bytesPerSample", ">= 0", bps);
  if (align != 64) return fail("arena.alignment", 64, align);
  plan->bytesPerSample = uint64_t(bps);
  plan->lowerBoundPerSample = uint64_t(lb < 0 ? 0 : lb);
  plan->alignment = uint64_t(align);

  // tensors
  const Obj* tensors = r.need(h, "tensors", "header");
  if (!r.ok) return r.err;
  if (tensors->type != msgpack::type::ARRAY) return fail("tensors", "array", type_name(*tensors));
  plan->tensors.resize(tensors->via.array.size);
  plan->weightBytes = 0;
  for (uint32_t i = 0; i < tensors->via.array.size; ++i) {
    const Obj& t = tensors->via.array.ptr[i];
    const std::string p = "tensors[" + std::to_string(i) + "]";
    if (t.type != msgpack::type::MAP) return fail(p, "map", type_name(t));
    TensorInfo& ti = plan->tensors[i];
    std::string dtype, kind;
    int64_t off = 0, bytes = 0;
    r.as_str(r.need(t, "name", p), p + ".name", &ti.name);
    if (r.ok) r.as_str(r.need(t, "dtype", p), p + ".dtype", &dtype);
    if (r.ok) r.as_ints(r.need(t, "shape", p), p + ".shape", &ti.shape);
    if (r.ok) r.as_str(r.need(t, "kind", p), p + ".kind", &kind);
    if (r.ok) r.as_int(r.need(t, "offset", p), p + ".offset", &off);
    if (r.ok) r.as_int(r.need(t, "bytes", p), p + ".bytes", &bytes);
    if (!r.ok) return r.err;
    const std::string pn = p + " (" + ti.name + ")";
    if (!parse_dtype(dtype, &ti.dtype)) return fail(pn + ".dtype", "float32|int64|int32|bool", "\"" + dtype + "\"");
    if (ti.dtype != DType::kFloat32) plan->allFloat = false;
    if (kind == "input") ti.kind = TensorKind::kInput;
    else if (kind == "output") ti.kind = TensorKind::kOutput;
    else if (kind == "activation") ti.kind = TensorKind::kActivation;
    else if (kind == "weight") ti.kind = TensorKind::kWeight;
    else return fail(pn + ".kind", "input|output|activation|weight", "\"" + kind + "\"");
    if (off < 0) return fail(pn + ".offset", ">= 0", off);
    if (bytes < 0) return fail(pn + ".bytes", ">= 0", bytes);
    ti.offset = uint64_t(off);
    ti.bytes = uint64_t(bytes);
    int negatives = 0;
    int64_t count = 1;
    for (size_t d = 0; d < ti.shape.size(); ++d) {
      int64_t v = ti.shape[d];
      if (v < 0) {
        ++negatives;
        if (ti.is_weight()) return fail(pn + ".shape[" + std::to_string(d) + "]", ">= 0 (a weight has no batch)", v);
        if (v < -(int64_t(1) << 20)) return fail(pn + ".shape[" + std::to_string(d) + "]", "-k with k <= 2^20", v);
        v = -v;
      }
      // A product that overflows could pass the bytes check below and mislead every kernel.
      if (__builtin_mul_overflow(count, v, &count) || count > (int64_t(1) << 40))
        return fail(pn + ".shape", "at most 2^40 elements", shape_text(ti.shape));
    }
    if (!ti.is_weight()) {
      if (negatives != 1) return fail(pn + ".shape", "exactly one entry -k (k x batch)", shape_text(ti.shape));
      if (ti.kind != TensorKind::kActivation && ti.shape[size_t(ti.batch_axis())] != -1)
        return fail(pn + ".shape", "a plain batch entry -1 (graph inputs and outputs)", shape_text(ti.shape));
      if (!ti.batch_first()) plan->batchFirst = false;
    }
    const uint64_t esize = dtype_size(ti.dtype);
    if (uint64_t(ti.elements()) * esize != ti.bytes)
      return fail(pn + ".bytes", std::to_string(ti.elements() * int64_t(esize)) + (ti.is_weight() ? "" : " per sample") + " (" +
                                     dtype_name(ti.dtype) + " x shape)", ti.bytes);
    if (ti.is_weight()) {
      if (ti.offset % pf::kAlignment != 0) return fail(pn + ".offset", "a multiple of 64", ti.offset);
      if (!check_range(r, pn, ti.offset, ti.bytes, blen, "blob length")) return r.err;
      ti.raw = plan->blob + ti.offset;
      ti.data = reinterpret_cast<const float*>(ti.raw);
      plan->weightBytes += ti.bytes;
    } else {
      if (ti.offset % 8 != 0) return fail(pn + ".offset", "a multiple of 8", ti.offset);
      if (!check_range(r, pn, ti.offset, ti.bytes, plan->bytesPerSample, "arena.bytesPerSample")) return r.err;
      ti.data = nullptr;
    }
  }
  const int32_t ntensors = int32_t(plan->tensors.size());
  auto tensor_ids = [&](const Obj* o, const std::string& p, std::vector<int32_t>* out, bool allow_absent) {
    std::vector<int64_t> v;
    if (!r.as_ints(o, p, &v)) return false;
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      if ((v[i] == -1 && allow_absent)) { out->push_back(kAbsentInput); continue; }
      if (v[i] < 0 || v[i] >= ntensors)
        return r.bad(p + "[" + std::to_string(i) + "]", "a tensor id in [0, " + std::to_string(ntensors) + ")", std::to_string(v[i]));
      out->push_back(int32_t(v[i]));
    }
    return true;
  };
  if (!tensor_ids(r.need(h, "inputs", "header"), "inputs", &plan->inputs, false)) return r.err;
  if (!tensor_ids(r.need(h, "outputs", "header"), "outputs", &plan->outputs, false)) return r.err;
  for (size_t i = 0; i < plan->inputs.size(); ++i)
    if (plan->tensors[plan->inputs[i]].is_weight())
      return fail("inputs[" + std::to_string(i) + "]", "a non-weight tensor", "weight " + plan->tensors[plan->inputs[i]].name);
  for (size_t i = 0; i < plan->outputs.size(); ++i)
    if (plan->tensors[plan->outputs[i]].is_weight())
      return fail("outputs[" + std::to_string(i) + "]", "a non-weight tensor", "weight " + plan->tensors[plan->outputs[i]].name);

  // ops
  const Obj* ops = r.need(h, "ops", "header");
  if (!r.ok) return r.err;
  if (ops->type != msgpack::type::ARRAY) return fail("ops", "array", type_name(*ops));
  plan->ops.resize(ops->via.array.size);
  for (uint32_t i = 0; i < ops->via.array.size; ++i) {
    const Obj& o = ops->via.array.ptr[i];
    const std::string p = "ops[" + std::to_string(i) + "]";
    if (o.type != msgpack::type::MAP) return fail(p, "map", type_name(o));
    Op& op = plan->ops[i];
    std::string type;
    if (!r.as_str(r.need(o, "op", p), p + ".op", &type)) return r.err;
    if (const Obj* n = map_get(o, "name")) if (n->type == msgpack::type::STR) r.as_str(n, p + ".name", &op.name);
    const std::string pn = p + " (" + type + (op.name.empty() ? "" : " " + op.name) + ")";
    if (!parse_op_type(type, &op.type)) {
      Fail f = fail(pn + ".op", "one of the ops in docs/plan-format.md", "\"" + type + "\"");
      f.status = Status::kUnsupportedOp;
      return f;
    }
    if (!tensor_ids(r.need(o, "inputs", p), pn + ".inputs", &op.inputs, true)) return r.err;
    if (!tensor_ids(r.need(o, "outputs", p), pn + ".outputs", &op.outputs, false)) return r.err;
    if (op.outputs.empty()) return fail(pn + ".outputs", "at least one tensor", "none");
    for (int32_t out : op.outputs)
      if (plan->tensors[out].is_weight()) return fail(pn + ".outputs", "non-weight tensors", "weight " + plan->tensors[out].name);
    // Range and ConstantOfShape generate a batch-sized tensor from attributes alone.
    const bool generator = op.type == OpType::kRange || op.type == OpType::kConstantOfShape;
    if (!generator && (op.inputs.empty() || op.inputs[0] == kAbsentInput)) return fail(pn + ".inputs[0]", "a tensor", "none");
    if (!parse_attrs(r, map_get(o, "attrs"), op.type, pn + ".attrs", &op.attrs)) return r.err;
  }
  return check_dataflow(*plan);
}

// The whole file: preamble, then one profile (v2) or the profile table and each profile (v3).
// With several profiles, a profile's errors name it first ("profiles[1].tensors[3] ...").
Fail parse(const uint8_t* data, size_t size, std::vector<Plan>* plans) {
  Layout L;
  Fail f = parse_preamble(data, size, &L);
  if (f.status != Status::kOk) return f;
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  if (L.version == pf::kVersionSingle) regions.emplace_back(L.hoff, L.hlen);
  else if (f = plan_reader::parse_profile_table(data, L, &regions); f.status != Status::kOk) return f;
  plans->resize(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    f = parse_header(data, regions[i].first, regions[i].second, L.boff, L.blen, &(*plans)[i]);
    if (f.status != Status::kOk) {
      if (regions.size() > 1) f.message = "profiles[" + std::to_string(i) + "]." + f.message;
      return f;
    }
  }
  return plan_reader::check_profiles_agree(*plans);
}

class MappedPlanFile : public PlanFile {
 public:
  MappedPlanFile(void* base, size_t size) : base_(base), size_(size) {}
  ~MappedPlanFile() override {
    if (base_ && size_) munmap(base_, size_);
  }
  MappedPlanFile(const MappedPlanFile&) = delete;
  MappedPlanFile& operator=(const MappedPlanFile&) = delete;
  const Plan& plan() const override { return plans_[0]; }
  const std::vector<Plan>& profiles() const override { return plans_; }
  const uint8_t* mapping() const override { return static_cast<const uint8_t*>(base_); }
  uint64_t mapping_bytes() const override { return size_; }
  std::vector<Plan> plans_;

 private:
  void* base_;
  size_t size_;
};

}  // namespace

Status parse_plan_profiles(const uint8_t* data, size_t size, std::vector<Plan>* out, std::string* message) {
  std::vector<Plan> plans;
  Fail f = parse(data, size, &plans);
  if (f.status != Status::kOk) {
    if (message) *message = f.message;
    return f.status;
  }
  *out = std::move(plans);
  return Status::kOk;
}

Status parse_plan(const uint8_t* data, size_t size, Plan* out, std::string* message) {
  std::vector<Plan> plans;
  const Status s = parse_plan_profiles(data, size, &plans, message);
  if (s == Status::kOk) *out = std::move(plans[0]);
  return s;
}

uint64_t distinct_weight_bytes(const std::vector<Plan>& profiles) {
  std::map<uint64_t, uint64_t> by_offset;  // profiles point at one copy of a shared weight
  for (const Plan& p : profiles)
    for (const TensorInfo& t : p.tensors)
      if (t.is_weight()) by_offset[t.offset] = std::max(by_offset[t.offset], t.bytes);
  uint64_t n = 0;
  for (const auto& [off, bytes] : by_offset) n += bytes;
  return n;
}

Status read_plan(const std::string& path, std::unique_ptr<PlanFile>* out, std::string* message) {
  out->reset();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *message = "open " + path + ": " + std::strerror(errno);
    return Status::kIoError;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *message = path + ": not a regular file";
    ::close(fd);
    return Status::kIoError;
  }
  size_t size = size_t(st.st_size);
  void* base = nullptr;
  if (size > 0) {
    base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      *message = "mmap " + path + ": " + std::strerror(errno);
      ::close(fd);
      return Status::kIoError;
    }
  }
  ::close(fd);  // the mapping stays valid
  auto file = std::make_unique<MappedPlanFile>(base, size);
  static const uint8_t kEmpty[1] = {0};
  Status s = parse_plan_profiles(base ? static_cast<const uint8_t*>(base) : kEmpty, size, &file->plans_, message);
  if (s != Status::kOk) {
    *message = path + ": " + *message;
    return s;
  }
  *out = std::move(file);
  return Status::kOk;
}

}  // namespace memlane
