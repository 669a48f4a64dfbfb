// Runs a PlanBuilder plan through the CPU backend (tests only).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
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
