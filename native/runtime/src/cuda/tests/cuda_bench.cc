// memlane_cuda_bench PLAN [--batches 1,16,128] [--iters 50] [--warmup 5] [--budget] [key=value ...]
// In-process timing of the CUDA backend for the techniques that a synchronous run() loop
// cannot show: "sync" calls run() back to back (what infer.native does); "pipelined"
// keeps two submit()s in flight (overlap, asyncOutputs) and measures each request from
// submit to its callback; "threads" runs one caller thread per context. Prints one JSON
// object per batch size. Without a GPU prints {"available":false,"reason":...} and exits 0.
// Device memory is printed at each step ("stage" lines: the context alone, then prepared).
// --budget prints what the backend would allocate for the largest batch (device_budget.h),
// computed on the host: it needs no GPU, and the memory estimate reads it.
// Run by bench/gpu.ts. Ran on an H200 on 2026-12-04 (docs/gpu.md, "Status"); bench/gpu.ts has not.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_backend.h"
#include "device_budget.h"
#include "device_memory.h"
#include "forward.h"

using namespace memlane;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return o;
}

// {"maxBatch", "weightBytes", "uploadStagingBytes", "contexts", "perContext": [{name, bytes}],
//  "perRequest": [{name, bytes}]}: per-request holds what arena=per-request allocates around
// each run (none with the default arena=once).
int print_budget(const char* planPath, int64_t maxBatch, const BackendOptions& bo) {
  std::string msg;
  cuda::CudaOptions o;
  if (cuda::parse_cuda_options(bo.switches, &o, &msg) != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 2;
  std::unique_ptr<PlanFile> file;
  if (read_plan(planPath, &file, &msg) != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
  // A plan the backend would refuse at load has no budget: say why, as prepare() would.
  if (cuda::validate_plan(file->plan(), &msg) != Status::kOk || (o.fp16 && cuda::check_fp16_integers(file->plan(), &msg) != Status::kOk))
    return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
  const cuda::DeviceBudget b = cuda::device_budget(file->plan(), maxBatch, o);
  auto list = [](const std::vector<std::pair<std::string, uint64_t>>& v) {
    std::string s = "[";
    for (const auto& [n, bytes] : v) s += (s.size() > 1 ? "," : "") + std::string("{\"name\":\"") + n + "\",\"bytes\":" + std::to_string(bytes) + "}";
    return s + "]";
  };
  std::vector<std::pair<std::string, uint64_t>> perRequest;
  if (!o.arenaOnce) perRequest = {{"arena", b.arenaBytes}, {"im2col", b.colBytes}};
  std::printf("{\"maxBatch\":%lld,\"weightBytes\":%llu,\"uploadStagingBytes\":%llu,\"contexts\":%d,\"perContext\":%s,\"perRequest\":%s}\n",
              (long long)maxBatch, (unsigned long long)b.weightBytes, (unsigned long long)b.uploadStagingBytes, o.contexts,
              list(b.context_allocations(o)).c_str(), list(perRequest).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: memlane_cuda_bench PLAN [--batches 1,16,128] [--iters N] [--warmup N] [switch=value ...]\n");
    return 2;
  }
  std::vector<int64_t> batches{1, 16, 128};
  int iters = 50, warmup = 5;
  bool budgetOnly = false;
  BackendOptions bo;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batches" && i + 1 < argc) {
      batches.clear();
      for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ",")) batches.push_back(std::atoll(t));
    } else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--budget") budgetOnly = true;
    else if (auto eq = a.find('='); eq != std::string::npos) bo.switches[a.substr(0, eq)] = a.substr(eq + 1);
  }
  if (batches.empty() || *std::min_element(batches.begin(), batches.end()) < 1) {
    std::fprintf(stderr, "--batches: expected batch sizes >= 1, e.g. 1,16,128\n");
    return 2;
  }
  Status st;
  std::string msg;
  if (budgetOnly) return print_budget(argv[1], *std::max_element(batches.begin(), batches.end()), bo);
  auto backend = make_cuda_backend(bo, &st, &msg);
  if (!backend) {
    std::printf("{\"available\":false,\"reason\":\"%s: %s\"}\n", status_name(st), esc(msg).c_str());
    return st == Status::kBackendUnavailable ? 0 : 1;
  }
  auto* cb = dynamic_cast<cuda::CudaBackend*>(backend.get());
  // Device memory at each step of the start (what a memory estimate has to add up): the
  // context alone, then after prepare (weights, arenas, cuBLAS handles and workspaces).
  auto stage = [&](const char* name) {
    const MemoryStats s = backend->memory_stats();
    // perProcess false: NVML could not name this process, the figure is the whole device's.
    const bool perProcess = cuda::read_device_memory(bo.deviceIndex).perProcess;
    std::printf("{\"stage\":\"%s\",\"deviceUsedBytes\":%lld,\"perProcess\":%s,\"weightBytesDevice\":%llu,\"arenaBytes\":%llu,"
                "\"workspaceBytes\":%llu}\n", name, (long long)s.deviceUsedBytes, perProcess ? "true" : "false",
                (unsigned long long)s.weightBytesDevice, (unsigned long long)s.arenaBytes, (unsigned long long)s.workspaceBytes);
    std::fflush(stdout);
  };
  {  // which GPU and driver the readings belong to (the estimate's calibration is keyed by them)
    cudaDeviceProp prop{};
    int driver = 0, runtime = 0;
    cudaGetDeviceProperties(&prop, bo.deviceIndex);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf("{\"stage\":\"device\",\"name\":\"%s\",\"driver\":%d,\"runtime\":%d,\"totalBytes\":%llu}\n",
                esc(prop.name).c_str(), driver, runtime, (unsigned long long)prop.totalGlobalMem);
  }
  stage("context");
  std::unique_ptr<PlanFile> file;
  if (read_plan(argv[1], &file, &msg) != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
  const Plan& plan = file->plan();
  const int64_t maxBatch = *std::max_element(batches.begin(), batches.end());
  if (backend->prepare(plan, maxBatch, &msg) != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
  const int contexts = cb->options().contexts;
  stage("prepared");

  for (int64_t b : batches) {
    // Per caller: its own inputs/outputs (two sets for the pipelined mode).
    auto make = [&](std::vector<std::vector<float>>& in, std::vector<std::vector<float>>& out,
                    std::vector<const float*>& ip, std::vector<float*>& op) {
      // Buffers in each tensor's own dtype (the backend reads them so): float32 inputs 0.5,
      // integer and bool ones 0 (a valid id, index and mask everywhere).
      auto words = [&](int32_t id) { return (size_t(b * plan.tensors[id].elements()) * dtype_size(plan.tensors[id].dtype) + 3) / 4; };
      for (int32_t id : plan.inputs) in.emplace_back(words(id), plan.tensors[id].dtype == DType::kFloat32 ? 0.5f : 0.f);
      for (int32_t id : plan.outputs) out.emplace_back(words(id), 0.f);
      for (auto& v : in) ip.push_back(v.data());
      for (auto& v : out) op.push_back(v.data());
    };
    struct Io { std::vector<std::vector<float>> in, out; std::vector<const float*> ip; std::vector<float*> op; };
    std::vector<Io> io(std::max(2, contexts));
    for (auto& x : io) make(x.in, x.out, x.ip, x.op);

    // sync: run() back to back
    std::vector<double> lat;
    for (int i = 0; i < warmup + iters; ++i) {
      auto t = Clock::now();
      if (backend->run(b, io[0].ip.data(), io[0].op.data(), &msg) != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
      if (i >= warmup) lat.push_back(ms_since(t));
    }
    double syncTotal = 0;
    for (double l : lat) syncTotal += l;

    // pipelined: two requests in flight through submit()
    std::vector<double> plat(size_t(warmup + iters), 0);
    std::vector<Clock::time_point> started(size_t(warmup + iters));
    std::mutex mu;
    auto t0 = Clock::now();
    Clock::time_point tw = t0;
    for (int i = 0; i < warmup + iters; ++i) {
      if (i == warmup) {
        cb->drain(&msg);
        tw = Clock::now();
      }
      started[size_t(i)] = Clock::now();
      Io& x = io[size_t(i % 2)];
      st = cb->submit(b, x.ip.data(), x.op.data(), [&, i](Status, const std::string&) {
        std::lock_guard<std::mutex> l(mu);
        plat[size_t(i)] = ms_since(started[size_t(i)]);
      }, &msg);
      if (st != Status::kOk) return std::fprintf(stderr, "%s\n", msg.c_str()), 1;
    }
    cb->drain(&msg);
    const double pipeTotal = ms_since(tw);
    std::vector<double> pl(plat.begin() + warmup, plat.end());

    // threads: one caller per context, run() each
    double thrTotal = -1;
    if (contexts > 1) {
      std::atomic<int> next{0};
      auto t = Clock::now();
      std::vector<std::thread> th;
      for (int c = 0; c < contexts; ++c)
        th.emplace_back([&, c] {
          std::string m;
          while (next.fetch_add(1) < iters) backend->run(b, io[size_t(c)].ip.data(), io[size_t(c)].op.data(), &m);
        });
      for (auto& x : th) x.join();
      thrTotal = ms_since(t);
    }
    const MemoryStats ms = backend->memory_stats();
    std::printf("{\"available\":true,\"batch\":%lld,\"iterations\":%d,"
                "\"sync\":{\"p50\":%.4f,\"p99\":%.4f,\"throughputPerS\":%.1f},"
                "\"pipelined\":{\"p50\":%.4f,\"p99\":%.4f,\"throughputPerS\":%.1f},"
                "\"threads\":{\"contexts\":%d,\"throughputPerS\":%.1f},"
                "\"deviceUsedBytes\":%lld,\"arenaBytes\":%llu,\"weightBytesDevice\":%llu,\"workspaceBytes\":%llu,\"notes\":\"%s\"}\n",
                (long long)b, iters, pct(lat, 0.5), pct(lat, 0.99), 1000.0 * b * iters / syncTotal,
                pct(pl, 0.5), pct(pl, 0.99), 1000.0 * b * iters / pipeTotal, contexts,
                thrTotal > 0 ? 1000.0 * b * iters / thrTotal : -1.0, (long long)ms.deviceUsedBytes,
                (unsigned long long)ms.arenaBytes, (unsigned long long)ms.weightBytesDevice,
                (unsigned long long)ms.workspaceBytes, esc(cb->notes()).c_str());
    std::fflush(stdout);
  }
  return 0;
}
