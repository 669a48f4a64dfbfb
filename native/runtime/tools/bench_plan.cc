// memlane-bench PLAN [batch] [iterations] [threads]: times Runtime::run_unchecked on random
// inputs (p50/mean in microseconds). With MEMLANE_PROFILE=1 the CPU backend prints per-op times.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <unistd.h>

#include "memlane/runtime.h"

namespace {

// VmRSS and VmHWM of this process, KiB (-1: unreadable).
struct Kib {
  long rss = -1, hwm = -1;
};
Kib status_kib() {
  Kib k;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      if (!std::strncmp(line, "VmRSS:", 6)) k.rss = std::atol(line + 6);
      if (!std::strncmp(line, "VmHWM:", 6)) k.hwm = std::atol(line + 6);
    }
    std::fclose(f);
  }
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS reads OPENBLAS_NUM_THREADS when it loads, before main, and starts that many threads,
  // which poll for a while after start: 3-4 % of a short run's samples in `perf record` of a
  // stem conv. memlane-rt's worker is started with it set to 1 (src/workers/specs.ts); so that
  // this tool times what the worker runs, it starts itself again with the same setting.
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);
    std::perror("memlane-bench: re-exec with OPENBLAS_NUM_THREADS=1 failed, running as is");
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: memlane-bench PLAN [batch=1] [iterations=200] [threads=1]\n");
    return 2;
  }
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 1;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 200;
  memlane::RuntimeOptions o;
  o.device = "cpu";
  o.threads = argc > 4 ? std::atoi(argv[4]) : 1;
  memlane::RtError err;
  auto rt = memlane::Runtime::create(o, &err);
  if (!rt || !rt->load(argv[1], batch, &err)) {
    std::fprintf(stderr, "error %d: %s\n", err.code, err.message.c_str());
    return 1;
  }
  const Kib loaded = status_kib();  // what the load left resident (repacked weights, kernels)
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<const float*> ip;
  std::vector<float*> op;
  // Buffers sized in 8-byte words for any dtype; float inputs random, integer/bool ones 1: a
  // valid index into any embedding table of 2+ rows, and an attention mask that attends to
  // every token (all zeros masks every key, which made gpt2's causal attention skip the
  // masked-score work real inputs pay: 0.5 ms here against 5 ms with real masks).
  std::vector<std::vector<uint64_t>> in_w, out_w;
  for (const auto& t : rt->inputs()) {
    in_w.emplace_back((size_t(batch * t.elementsPerSample) * t.elementBytes + 7) / 8, 0);
    const int64_t n = batch * t.elementsPerSample;
    if (t.dtype == "float32") {
      float* f = reinterpret_cast<float*>(in_w.back().data());
      for (int64_t k = 0; k < n; ++k) f[k] = u(g);
    } else {
      auto* b = reinterpret_cast<unsigned char*>(in_w.back().data());
      for (int64_t k = 0; k < n; ++k) b[k * t.elementBytes] = 1;  // little-endian: the low byte
    }
    ip.push_back(reinterpret_cast<const float*>(in_w.back().data()));
  }
  for (const auto& t : rt->outputs()) {
    out_w.emplace_back((size_t(batch * t.elementsPerSample) * t.elementBytes + 7) / 8);
    op.push_back(reinterpret_cast<float*>(out_w.back().data()));
  }
  for (int i = 0; i < 20; ++i) rt->run_unchecked(batch, ip.data(), op.data(), &err);
  // Wall time, this thread's CPU time (steadier on a shared machine; exact at --threads 1) and
  // the process's (every pool worker's too, spinning included: with several threads, the
  // work a call cost the machine).
  auto cpu_us = [](clockid_t id) {
    timespec ts;
    clock_gettime(id, &ts);
    return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
  };
  std::vector<double> t(static_cast<size_t>(iters)), tc(static_cast<size_t>(iters)), tp(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_us(CLOCK_THREAD_CPUTIME_ID), p0 = cpu_us(CLOCK_PROCESS_CPUTIME_ID);
    rt->run_unchecked(batch, ip.data(), op.data(), &err);
    tc[size_t(i)] = cpu_us(CLOCK_THREAD_CPUTIME_ID) - c0;
    tp[size_t(i)] = cpu_us(CLOCK_PROCESS_CPUTIME_ID) - p0;
    t[size_t(i)] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(tc.begin(), tc.end());
  std::sort(tp.begin(), tp.end());
  double mean = 0;
  for (double x : t) mean += x;
  mean /= iters;
  std::sort(t.begin(), t.end());
  std::printf("%s batch %lld: p50 %.2f us, mean %.2f us, thread cpu p50 %.2f us min %.2f us, process cpu p50 %.2f us\n",
              argv[1], (long long)batch, t[t.size() / 2], mean, tc[tc.size() / 2], tc[0], tp[tp.size() / 2]);
  // Resident memory after the runs (steady), after the load, and the peak since the start.
  const Kib after = status_kib();
  std::printf("rss %.1f MiB (after load %.1f), peak rss %.1f MiB\n", double(after.rss) / 1024, double(loaded.rss) / 1024,
              double(after.hwm) / 1024);
  if (const std::string n = rt->notes(); !n.empty()) std::printf("notes: %s\n", n.c_str());
  return 0;
}
