// Golden protocol bytes (test/fixtures/golden, written once by make_golden.py) decode to
// the values in expected.json, and the C++ definitions agree with src/transport/protocol.ts.
#include <cstring>
#include <fstream>
#include <iterator>
#include <msgpack.hpp>

#include "harness.h"
#include "memlane/protocol.h"
#include "rt/value.h"

using namespace memlane;
using rt::Obj;

static std::string slurp(const std::string& name) {
  std::ifstream f(std::string(MEMLANE_SOURCE_DIR) + "/test/fixtures/golden/" + name, std::ios::binary);
  CHECK_MSG(f.good(), "missing fixture " + name);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
static std::string str(const Obj* o) {
  std::string s;
  if (o) rt::as_str(*o, &s);
  return s;
}
static int64_t num(const Obj* o) {
  int64_t v = -999;
  if (o) rt::as_int(*o, &v);
  return v;
}

int main() {
  {
    const std::string b = slurp("hello.msgpack");
    msgpack::object_handle oh = msgpack::unpack(b.data(), b.size());
    const Obj* h = &oh.get();
    CHECK(num(rt::get(h, "v")) == protocol::kVersion);
    CHECK(str(rt::get(h, "type")) == protocol::type::kHello);
    CHECK(str(rt::get(h, "id")) == "w-1");
    CHECK(num(rt::get(h, "pid")) == 4242);
    CHECK(str(rt::get(h, "worker")) == "python");
    const Obj* caps = rt::get(h, "capabilities");
    CHECK(caps && caps->type == msgpack::type::ARRAY && caps->via.array.size == 2);
    if (caps && caps->via.array.size == 2) {
      CHECK(str(&caps->via.array.ptr[0]) == "train");
      CHECK(str(&caps->via.array.ptr[1]) == "infer.ort");
    }
    const Obj* ver = rt::get(h, "versions");
    CHECK(str(rt::get(ver, "python")) == "3.11.7");
    CHECK(str(rt::get(ver, "protocol")) == "1");
    // Re-encoding the same map in the same order gives the same bytes.
    rt::Val v = rt::Val::map();
    rt::Val c = rt::Val::array();
    c.push("train").push("infer.ort");
    rt::Val vs = rt::Val::map();
    vs.set("python", "3.11.7").set("protocol", "1");
    v.set("v", 1).set("type", "hello").set("id", "w-1").set("pid", 4242).set("worker", "python")
        .set("capabilities", c).set("versions", vs);
    CHECK_MSG(rt::packb(v) == b, "re-encoded hello differs from the golden bytes");
  }
  {
    const std::string b = slurp("task.msgpack");
    msgpack::object_handle oh = msgpack::unpack(b.data(), b.size());
    const Obj* t = &oh.get();
    CHECK(str(rt::get(t, "type")) == protocol::type::kTask);
    CHECK(str(rt::get(t, "id")) == "t-7");
    CHECK(str(rt::get(t, "task")) == "infer.ort");
    const Obj* args = rt::get(t, "args");
    CHECK(str(rt::get(args, "model")) == "/m.onnx");
    std::vector<int64_t> bs;
    CHECK(rt::get(args, "batchSizes") && rt::as_int_list(*rt::get(args, "batchSizes"), &bs) && bs == (std::vector<int64_t>{1, 64}));
    CHECK(num(rt::get(args, "threads")) == 2);
    const Obj* ts = rt::get(t, "tensors");
    CHECK(ts && ts->type == msgpack::type::ARRAY && ts->via.array.size == 2);
    if (ts && ts->via.array.size == 2) {
      const Obj* t0 = &ts->via.array.ptr[0];
      const Obj* t1 = &ts->via.array.ptr[1];
      std::vector<int64_t> s0, s1;
      CHECK(str(rt::get(t0, "name")) == "inputs" && str(rt::get(t0, "dtype")) == "float32" && num(rt::get(t0, "frame")) == 0);
      CHECK(rt::as_int_list(*rt::get(t0, "shape"), &s0) && s0 == (std::vector<int64_t>{2, 3}));
      CHECK(str(rt::get(t1, "name")) == "labels" && str(rt::get(t1, "dtype")) == "int64" && num(rt::get(t1, "frame")) == 1);
      CHECK(rt::as_int_list(*rt::get(t1, "shape"), &s1) && s1 == (std::vector<int64_t>{3}));
    }
    const std::string f0 = slurp("task.frame0.bin"), f1 = slurp("task.frame1.bin");
    CHECK(f0.size() == 24 && f1.size() == 24);
    if (f0.size() == 24) {
      float v[6];
      std::memcpy(v, f0.data(), 24);
      const float want[6] = {0.0f, 1.0f, -2.5f, 3.25f, 0.001f, -7.0f};
      for (int i = 0; i < 6; ++i) CHECK(v[i] == want[i]);
    }
    if (f1.size() == 24) {
      int64_t v[3];
      std::memcpy(v, f1.data(), 24);
      CHECK(v[0] == 1 && v[1] == -2 && v[2] == 9007199254740993LL);
    }
  }
  {
    const std::string b = slurp("error.msgpack");
    msgpack::object_handle oh = msgpack::unpack(b.data(), b.size());
    const Obj* e = &oh.get();
    CHECK(str(rt::get(e, "type")) == protocol::type::kError);
    CHECK(num(rt::get(e, "code")) == int(protocol::ErrorCode::kVersionMismatch));
    CHECK(std::string(protocol::error_code_name(2)) == "VERSION_MISMATCH");
    CHECK(str(rt::get(e, "message")) == "worker speaks protocol v2, orchestrator speaks v1");
    const Obj* d = rt::get(e, "details");
    CHECK(num(rt::get(d, "worker")) == 2 && num(rt::get(d, "orchestrator")) == 1);
  }
  // The C++ codes and names match the TypeScript reference (parsed from its source).
  {
    std::ifstream f(std::string(MEMLANE_SOURCE_DIR) + "/src/transport/protocol.ts");
    const std::string ts((std::istreambuf_iterator<char>(f)), {});
    CHECK_CONTAINS(ts, "PROTOCOL_VERSION = " + std::to_string(protocol::kVersion) + ";");
    for (int code = 1; code <= 16; ++code)
      CHECK_CONTAINS(ts, std::string(protocol::error_code_name(code)) + ": " + std::to_string(code) + ",");
    for (const char* t : protocol::kMessageTypes) CHECK_CONTAINS(ts, "\"" + std::string(t) + "\"");
    for (const char* p : {protocol::phase::kImport, protocol::phase::kRuntimeCreate, protocol::phase::kModelLoad,
                          protocol::phase::kFirstInference, protocol::phase::kSteadyInference, protocol::phase::kCudaContext,
                          protocol::phase::kWeightsUpload, protocol::phase::kArena})
      CHECK_CONTAINS(ts, "\"" + std::string(p) + "\"");
  }
  return mltest::finish("golden_protocol_test");
}
