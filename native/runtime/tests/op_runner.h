// Runs a PlanBuilder plan through the CPU backend (tests only).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "harness.h"
#include "cpu/kernel.h"
#include "plan_builder.h"

namespace mltest {

struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ULL;
  float next() {  // uniform in [-1, 1)
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return float((s >> 40) & 0xffffff) / float(1 << 23) - 1.f;
  }
  std::vector<float> vec(size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = next();
    return v;
  }
};

struct RunResult {
  memlane::Status status = memlane::Status::kOk;
  std::string message;
  std::vector<std::vector<float>> outputs;
};

inline RunResult run_plan(const PlanBuilder& b, int64_t batch, const std::vector<std::vector<float>>& inputs,
                          int threads = 1) {
  using namespace memlane;
  RunResult r;
  std::vector<uint8_t> bytes = b.build();
  Plan plan;
  r.status = parse_plan(bytes.data(), bytes.size(), &plan, &r.message);
  if (r.status != Status::kOk) return r;
  BackendOptions o;
  o.threads = threads;
  o.tuneConvs = false;  // the path make_conv's rules (and the test's switches) pick, not the fastest here
  auto be = make_cpu_backend(o, &r.status, &r.message);
  if (!be) return r;
  r.status = be->prepare(plan, batch, &r.message);
  if (r.status != Status::kOk) return r;
  std::vector<const float*> in;
  for (auto& v : inputs) in.push_back(v.data());
  std::vector<float*> out;
  for (int64_t id : b.outputs) {
    r.outputs.emplace_back(size_t(batch * b.tensors[size_t(id)].bytes / 4), -12345.f);
    out.push_back(r.outputs.back().data());
  }
  r.status = be->run(batch, in.data(), out.data(), &r.message);
  return r;
}

// b's plan parsed and prepared by the CPU backend for maxBatch samples, for tests that read the
// backend after its load (its kernels, stats, notes) or run it themselves. Kept together and
// never moved: the Plan's weights point into `bytes`, the backend into the Plan. `backend` is
// null where it was refused, with why in `message` (already reported through CHECK_MSG).
struct PreparedPlan {
  std::vector<uint8_t> bytes;
  memlane::Plan plan;
  std::unique_ptr<memlane::Backend> backend;
  std::string message;
};

inline std::unique_ptr<PreparedPlan> prepare_plan(const PlanBuilder& b, int64_t maxBatch, const memlane::BackendOptions& o = {}) {
  using namespace memlane;
  auto p = std::make_unique<PreparedPlan>();
  p->bytes = b.build();
  Status st = parse_plan(p->bytes.data(), p->bytes.size(), &p->plan, &p->message);
  CHECK_MSG(st == Status::kOk, p->message);
  if (st != Status::kOk) return p;
  p->backend = make_cpu_backend(o, &st, &p->message);
  if (!p->backend || p->backend->prepare(p->plan, maxBatch, &p->message) != Status::kOk) {
    CHECK_MSG(false, "prepare: " + p->message);
    p->backend.reset();
  }
  return p;
}

// How many kernels the CPU backend builds for b's plan after its load-time fusions (the op
// profile lists one per kernel), found by one profiled run of `batch` samples of `x` (the
// first input).
inline size_t built_kernels(const PlanBuilder& b, int64_t batch, const std::vector<float>& x) {
  using namespace memlane;
  auto p = prepare_plan(b, batch);
  if (!p->backend) return 0;
  auto& be = p->backend;
  std::string msg;
  std::vector<std::vector<float>> out;
  std::vector<float*> outs;
  for (int64_t id : b.outputs) out.emplace_back(size_t(batch * b.tensors[size_t(id)].bytes / 4));
  for (auto& v : out) outs.push_back(v.data());
  const float* ins[] = {x.data()};
  CHECK(be->set_profiling(true));
  CHECK(be->run(batch, ins, outs.data(), &msg) == Status::kOk);
  return be->op_profile().ops.size();
}

// Kernel::path() of the kernel the CPU backend's factory builds for op `oi` of b's plan (a Conv,
// on its own: no epilogue), or why none was built.
inline std::string conv_kernel_path(const PlanBuilder& b, size_t oi) {
  using namespace memlane;
  std::vector<uint8_t> bytes = b.build();
  Plan plan;
  std::string msg;
  if (parse_plan(bytes.data(), bytes.size(), &plan, &msg) != Status::kOk) return "plan refused: " + msg;
  cpu::BuildCtx bc{&plan, 1};
  Status st = Status::kOk;
  auto k = cpu::make_conv(bc, plan.ops[oi], &st, &msg);
  return k ? std::string(k->path()) : "no kernel: " + msg;
}

// Runs with typed inputs and outputs (plan v2 dtypes): each vector holds the tensor's bytes.
struct RawResult {
  memlane::Status status = memlane::Status::kOk;
  std::string message;
  std::vector<std::vector<uint8_t>> outputs;
  template <typename T>
  std::vector<T> out(size_t i) const {
    std::vector<T> v(outputs[i].size() / sizeof(T));
    std::memcpy(v.data(), outputs[i].data(), outputs[i].size());
    return v;
  }
};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline RawResult run_raw(const PlanBuilder& b, int64_t batch, const std::vector<std::vector<uint8_t>>& inputs, int threads = 1,
                         int64_t maxBatch = 0) {
  using namespace memlane;
  RawResult r;
  std::vector<uint8_t> bytes = b.build();
  Plan plan;
  r.status = parse_plan(bytes.data(), bytes.size(), &plan, &r.message);
  if (r.status != Status::kOk) return r;
  BackendOptions o;
  o.threads = threads;
  o.tuneConvs = false;  // the path make_conv's rules (and the test's switches) pick, not the fastest here
  auto be = make_cpu_backend(o, &r.status, &r.message);
  if (!be) return r;
  r.status = be->prepare(plan, maxBatch ? maxBatch : batch, &r.message);
  if (r.status != Status::kOk) return r;
  std::vector<std::vector<uint64_t>> in_store;
  std::vector<const float*> in;
  for (auto& v : inputs) {
    in_store.emplace_back((v.size() + 7) / 8);
    std::memcpy(in_store.back().data(), v.data(), v.size());
    in.push_back(reinterpret_cast<const float*>(in_store.back().data()));
  }
  std::vector<std::vector<uint64_t>> out_store;
  std::vector<float*> out;
  for (int64_t id : b.outputs) {
    out_store.emplace_back((size_t(batch * b.tensors[size_t(id)].bytes) + 7) / 8, 0xABABABABABABABABULL);
    out.push_back(reinterpret_cast<float*>(out_store.back().data()));
  }
  r.status = be->run(batch, in.data(), out.data(), &r.message);
  for (size_t i = 0; i < out_store.size(); ++i) {
    const size_t n = size_t(batch * b.tensors[size_t(b.outputs[i])].bytes);
    r.outputs.emplace_back(reinterpret_cast<uint8_t*>(out_store[i].data()), reinterpret_cast<uint8_t*>(out_store[i].data()) + n);
  }
  return r;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30f;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    float d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

}  // namespace mltest

// Fails the test (harness.h CHECK_MSG) when got and want differ by more than tol anywhere.
#define CHECK_CLOSE(got, want, tol, label)                                                          \
  do {                                                                                             \
    float d_ = ::mltest::max_abs_diff(got, want);                                                  \
    CHECK_MSG(d_ <= (tol), std::string(label) + ": max abs diff " + std::to_string(d_));          \
  } while (0)
