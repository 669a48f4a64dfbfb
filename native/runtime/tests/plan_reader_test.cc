// Plan reader: each check of docs/plan-format.md fails with a Status and a message naming
// the field; a valid plan's weights point into the mapping (never copied).
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "backend.h"
#include "harness.h"
#include "plan/plan.h"
#include "plan_builder.h"

using namespace memlane;

static mltest::PlanBuilder small_plan() {
  mltest::PlanBuilder b;
  int x = b.input("x", {4});
  int w = b.weight("w", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  int bias = b.weight("b", {3}, {0.5f, -0.5f, 1});
  int y = b.output("y", {3});
  b.op("Gemm", {x, w, bias}, {y}, {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t(0)}, {"transB", int64_t(1)}});
  return b;
}

static Status parse(const std::vector<uint8_t>& f, std::string* msg, Plan* p = nullptr) {
  Plan tmp;
  return parse_plan(f.data(), f.size(), p ? p : &tmp, msg);
}

static void expect_fail(const std::vector<uint8_t>& f, Status want, const char* field, const char* label) {
  std::string msg;
  Status s = parse(f, &msg);
  CHECK_MSG(s == want, std::string(label) + ": got " + status_name(s) + " " + msg);
  CHECK_CONTAINS(msg, field);
  CHECK_CONTAINS(msg, "expected");
  CHECK_CONTAINS(msg, "found");
}

int main() {
  namespace pf = plan_format;
  const std::vector<uint8_t> good = small_plan().build();
  {
    std::string msg;
    Plan p;
    CHECK_MSG(parse(good, &msg, &p) == Status::kOk, msg);
    CHECK(p.tensors.size() == 4);
    CHECK(p.ops.size() == 1 && p.ops[0].type == OpType::kGemm && p.ops[0].attrs.transB);
    CHECK(p.inputs.size() == 1 && p.outputs.size() == 1);
    CHECK(p.weightBytes == 48 + 12);
    CHECK(p.tensors[1].data[5] == 6.f);
    CHECK(p.producer == "memlane ctest");
  }
  // 1. truncated below the preamble
  expect_fail(std::vector<uint8_t>(good.begin(), good.begin() + 40), Status::kPlanInvalid, "file length", "short");
  // 2. magic
  {
    auto f = good;
    f[0] = 'X';
    expect_fail(f, Status::kPlanInvalid, "magic", "magic");
  }
  // 3. version
  {
    auto f = good;
    f[pf::kOffVersion] = uint8_t(pf::kVersion + 1);
    expect_fail(f, Status::kPlanInvalid, "version", "version");
    std::string msg;
    parse(f, &msg);
    CHECK_CONTAINS(msg, "expected 2 to 4, found 5");
    f[pf::kOffVersion] = 1;  // a v1 plan: refused with the way out
    parse(f, &msg);
    CHECK_CONTAINS(msg, "recompile it from its ONNX model");
  }
  // 4. header range past the end
  {
    auto f = good;
    mltest::PlanBuilder::put64(f, pf::kOffHeaderLength, f.size());
    expect_fail(f, Status::kPlanInvalid, "header length", "header range");
  }
  // 5. corrupt header byte -> hash
  {
    auto f = good;
    f[70] ^= 0x01;
    expect_fail(f, Status::kPlanInvalid, "header hash", "hash");
  }
  // 6. blob offset not aligned / overlapping the header
  {
    auto f = good;
    mltest::PlanBuilder::put64(f, pf::kOffBlobOffset, 65);
    expect_fail(f, Status::kPlanInvalid, "blob offset", "blob align");
    f = good;
    mltest::PlanBuilder::put64(f, pf::kOffBlobOffset, 64);
    expect_fail(f, Status::kPlanInvalid, "blob offset", "blob over header");
    f = good;
    mltest::PlanBuilder::put64(f, pf::kOffBlobLength, 1u << 20);
    expect_fail(f, Status::kPlanInvalid, "blob length", "blob range");
  }
  // 7. truncated file: the file length field catches it (blob shortened consistently)
  {
    auto f = good;
    f.resize(f.size() - 4);
    mltest::PlanBuilder::put64(f, pf::kOffBlobLength, 0);  // keep the blob range check passing
    expect_fail(f, Status::kPlanInvalid, "file length", "truncated");
    f = good;
    f.resize(f.size() - 4);
    std::string msg;
    CHECK(parse(f, &msg) == Status::kPlanInvalid);  // blob range or file length, either names it
  }
  // 8. tensor out of the blob
  {
    auto b = small_plan();
    b.tensors[2].offset = 1024;
    expect_fail(b.build(), Status::kPlanInvalid, "tensors[2] (b)", "weight range");
  }
  // 9. activation out of the arena
  {
    auto b = small_plan();
    b.bytes_per_sample_override = 8;
    expect_fail(b.build(), Status::kPlanInvalid, "arena.bytesPerSample", "activation range");
  }
  // 10. bytes inconsistent with the shape
  {
    auto b = small_plan();
    b.tensors[0].bytes = 12;
    expect_fail(b.build(), Status::kPlanInvalid, "tensors[0] (x).bytes", "bytes");
  }
  // 10b. a shape whose element count overflows int64 (the bytes check alone would wrap)
  {
    auto b = small_plan();
    b.tensors[1].shape = {int64_t(1) << 62, 4};
    b.tensors[1].bytes = 0;
    expect_fail(b.build(), Status::kPlanInvalid, "tensors[1] (w).shape", "overflow");
  }
  // 11. unknown op -> UNSUPPORTED_OP naming it
  {
    auto b = small_plan();
    b.ops[0].op = "Hardmax";
    std::string msg;
    CHECK(parse(b.build(), &msg) == Status::kUnsupportedOp);
    CHECK_CONTAINS(msg, "Hardmax");
  }
  // 12. op referencing a missing tensor
  {
    auto b = small_plan();
    b.ops[0].inputs[0] = 99;
    expect_fail(b.build(), Status::kPlanInvalid, "inputs[0]", "bad id");
  }
  // 13. header not msgpack (hash made consistent)
  {
    auto f = good;
    const uint64_t H = f[24] | (uint64_t(f[25]) << 8);
    for (uint64_t i = 0; i < H; ++i) f[64 + i] = 0xc1;  // never-used msgpack byte
    mltest::PlanBuilder::put64(f, pf::kOffHeaderHash, pf::fnv1a64(f.data() + 64, H));
    std::string msg;
    CHECK(parse(f, &msg) == Status::kPlanInvalid);
    CHECK_CONTAINS(msg, "header");
  }
  // Every single-byte truncation and every corrupted preamble byte fails cleanly (no crash).
  for (size_t n = 0; n < good.size(); n += 7) {
    std::string msg;
    CHECK(parse(std::vector<uint8_t>(good.begin(), good.begin() + n), &msg) != Status::kOk);
  }
  // Random corruption of the header (hash recomputed, so the msgpack itself is garbage or
  // subtly wrong): the reader refuses it or yields a plan the backend can prepare and run
  // without faulting.
  {
    mltest::PlanBuilder b = small_plan();
    int h = b.act("h", {3});
    b.tensors[size_t(b.outputs[0])].kind = "activation";
    int y2 = b.output("y2", {3});
    b.outputs = {y2};
    b.op("Relu", {h - 1}, {h});
    b.op("Softmax", {h}, {y2}, {{"axis", int64_t(1)}});
    const std::vector<uint8_t> base = b.build();
    const uint64_t H = base[24] | (uint64_t(base[25]) << 8);
    uint64_t seed = 12345;
    auto rnd = [&] { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return seed; };
    int parsed = 0;
    for (int it = 0; it < 3000; ++it) {
      auto f = base;
      const int flips = 1 + int(rnd() % 4);
      for (int k = 0; k < flips; ++k) f[64 + rnd() % H] = uint8_t(rnd());
      mltest::PlanBuilder::put64(f, pf::kOffHeaderHash, pf::fnv1a64(f.data() + 64, H));
      Plan p;
      std::string msg;
      if (parse_plan(f.data(), f.size(), &p, &msg) != Status::kOk) {
        CHECK(!msg.empty());
        continue;
      }
      ++parsed;
      BackendOptions o;
      Status st;
      auto be = make_cpu_backend(o, &st, &msg);
      if (be->prepare(p, 2, &msg) != Status::kOk) continue;
      std::vector<std::vector<float>> ins, outs;
      std::vector<const float*> ip;
      std::vector<float*> op;
      for (int32_t id : p.inputs) {
        ins.emplace_back(size_t(2 * p.tensors[id].elements()), 0.5f);
        ip.push_back(ins.back().data());
      }
      for (int32_t id : p.outputs) {
        outs.emplace_back(size_t(2 * p.tensors[id].elements()));
        op.push_back(outs.back().data());
      }
      be->run(2, ip.data(), op.data(), &msg);
    }
    std::printf("fuzz: %d of 3000 corrupted headers still parsed\n", parsed);
  }
  // Dataflow (issue 10): a plan with no op, or an output that no op writes, computes nothing.
  {
    mltest::PlanBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    std::string msg;
    CHECK(parse(b.build(), &msg) == Status::kPlanInvalid);
    CHECK_CONTAINS(msg, "ops: expected at least one op, found none (an empty list)");
  }
  {
    mltest::PlanBuilder b;
    int x = b.input("x", {4});
    int y = b.output("y", {4});
    int z = b.output("z", {4});
    b.op("Relu", {x}, {y});
    (void)z;
    std::string msg;
    CHECK(parse(b.build(), &msg) == Status::kPlanInvalid);
    CHECK_CONTAINS(msg, "outputs[1] (z): expected a tensor written by an op or a plan input, found tensor 2, which nothing writes");
  }
  // read_plan: maps the file; weights lie inside the mapping.
  {
    char path[] = "/tmp/memlane-plan-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, good.data(), good.size()) == ssize_t(good.size()));
    close(fd);
    std::unique_ptr<PlanFile> pfile;
    std::string msg;
    CHECK_MSG(read_plan(path, &pfile, &msg) == Status::kOk, msg);
    if (pfile) {
      const uint8_t* lo = pfile->mapping();
      const uint8_t* hi = lo + pfile->mapping_bytes();
      for (const auto& t : pfile->plan().tensors) {
        if (!t.is_weight()) continue;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(t.data);
        CHECK_MSG(p >= lo && p + t.bytes <= hi, t.name + " outside the mapping");
        CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
      }
    }
    unlink(path);
    CHECK(read_plan("/nonexistent/x.mlplan", &pfile, &msg) == Status::kIoError);
    CHECK(!pfile);
  }
  return mltest::finish("plan_reader_test");
}
