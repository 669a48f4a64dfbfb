#include "cpu/conv_tune.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/host_pages.h"
#include "cpu/conv_kernel.h"
#include "cpu/env_count.h"
#include "cpu/thread_pool.h"

namespace memlane::cpu {
namespace {

using conv_detail::ConvKernel;

// Timed runs a candidate gets after its warm-up (which faults its weights and scratch in);
// the minimum counts. Rounds go over every candidate in turn, so a slow stretch of a shared
// machine costs each of them a run, not one of them all of its runs.
constexpr int kRounds = 2;
// A candidate this much slower than the best so far is timed no more.
constexpr double kDropAfter = 1.5;
// The rule's kernel keeps the conv unless another one is faster by this fraction.
constexpr double kMargin = 0.05;
// Convs whose warm-up run takes longer are not timed (the rule's kernel stays): the tuning
// would cost a model's load seconds, for ops whose paths differ least (large products).
constexpr double kMaxWarmupSeconds = 0.025;

// The paths the tuner chooses among, and the switch that avoids each.
uint32_t avoid_bit(const char* path) {
  const std::string p = path;
  if (p == "winograd") return kAvoidWinograd;
  if (p == "direct") return kAvoidDirect;
  if (p == "pixel_rows") return kAvoidPixelRows;
  if (p == "flat") return kAvoidFlat;
  return 0;
}

std::vector<int64_t> shape_key(const ConvKernel& k, bool fused) {
  const auto& g = k.g;
  return {g.C, g.H, g.W, g.M, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, k.pb, k.pr, g.dh, g.dw, g.group,
          k.relu, int64_t(k.act.kind), k.has_res, k.copy_input, fused};
}

// MEMLANE_CONV_TUNE_LOG=1 (a tuning aid): each timed conv's candidates and times on stderr.
bool log_enabled() {
  static const bool on = env_count("MEMLANE_CONV_TUNE_LOG", 0) != 0;
  return on;
}

// Inside a network a conv finds its weights out of the caches: at batch 1 the rest of the
// network's weights and activations pass through them between two runs of it (and on a
// shared machine other jobs' data too). Timed with its weights cached, a kernel that reads a
// larger copy of them loses nothing for it: squeezenet1_1's 13x13 Winograd convs, whose U is
// 16/9 of the weights, ran at 0.74x the pixel-rows path's time hot and at 1.28x in the model
// (per-op means).
// So each timed run starts with the kernel's weights, in every form it holds them, flushed
// from every cache level; its input and scratch stay wherever the last run left them (in the
// model the input was just written by the op before).
void flush(const void* p, uint64_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const auto* c = static_cast<const char*>(p);
  for (uint64_t i = 0; i < bytes; i += 64) _mm_clflush(c + i);
#else
  (void)p;
  (void)bytes;
#endif
}

void flush_weights(const Kernel& kernel) {
  const auto* k = dynamic_cast<const ConvKernel*>(&kernel);
  if (!k) return;
  const auto& g = k->g;
  // (W only where the kernel reads it: flushing a page of the plan it never reads would fault
  // it in, and the pages of a repacked weight are about to be given back.)
  const auto repacked = k->repacked_weights();
  if (std::find(repacked.begin(), repacked.end(), k->w) == repacked.end()) flush(k->w, uint64_t(g.M * g.K()) * sizeof(float));
  if (k->b) flush(k->b, uint64_t(g.M) * sizeof(float));
  flush(k->U.data(), k->U.size() * sizeof(float));
  if (k->panels) flush(k->panels->w.data(), k->panels->w.size() * sizeof(float));
#if defined(__x86_64__) || defined(__i386__)
  _mm_mfence();
#endif
}

// MEMLANE_CONV_TUNE_FORCE=<path> (a test and A/B aid): where that path is among a conv's
// candidates it is kept whatever the times, so a test can take the tuner off the rule's path.
// (Read at each timed conv, not once a process: a test sets it between backends.)
std::string forced_path() {
  const char* e = std::getenv("MEMLANE_CONV_TUNE_FORCE");
  return e ? e : "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

size_t pick_conv_candidate(const std::vector<double>& seconds, double margin) {
  size_t best = 0;
  for (size_t i = 1; i < seconds.size(); ++i)
    if (seconds[i] >= 0 && (seconds[best] < 0 || seconds[i] < seconds[best])) best = i;
  if (best != 0 && seconds[0] >= 0 && seconds[best] > seconds[0] * (1.0 - margin)) return 0;
  return best;
}

ConvTuner::~ConvTuner() {
  if (arena_) munmap(arena_, arenaBytes_);
  if (ws_) munmap(ws_, wsBytes_);
}

bool ConvTuner::scratch(uint64_t arenaBytes, uint64_t wsFloats) {
  const auto grow = [](void** p, uint64_t* have, uint64_t want) {
    if (want <= *have) return true;
    if (*p) munmap(*p, *have);
    *have = 0;
    *p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*p == MAP_FAILED) {
      *p = nullptr;
      return false;
    }
    *have = want;
    return true;
  };
  return grow(&arena_, &arenaBytes_, std::max<uint64_t>(arenaBytes, 64)) &&
         grow(&ws_, &wsBytes_, std::max<uint64_t>(wsFloats * sizeof(float), 64));
}

// The scratch pages one conv's runs touched (its input, output and workspace: a few MiB at
// most) go back before the next conv is timed, so the load's peak holds one conv's, not the
// whole network's arena.
void ConvTuner::release_scratch() {
  if (arena_) madvise(arena_, arenaBytes_, MADV_DONTNEED);
  if (ws_) madvise(ws_, wsBytes_, MADV_DONTNEED);
}

// The timed runs of a kernel that reads W from the plan paged it in: resnet18's 3x3 weights,
// 45 MiB, were resident at the end of load where without tuning they came in at the first
// inference (and memlane estimate's load probe counted them on top of the weights). Its pages
// go back to the file as if never read, where the backend gives plan pages back at all (a
// read-only file mapping, MEMLANE_CPU_KEEP_WEIGHTS unset: cpu/weight_release.h); the first
// inference pages them in as before.
void ConvTuner::untouch_plan_weights(const float* w, uint64_t bytes) const {
  if (!givePagesBack_) return;
  const uintptr_t page = host_page_bytes(), a = reinterpret_cast<uintptr_t>(w);
  advise_dontneed((a + page - 1) & ~(page - 1), (a + bytes) & ~(page - 1));  // pages wholly inside W
}

double ConvTuner::time_once(const Kernel& k, uint64_t wsFloats, uint64_t arenaBytes, uint64_t zeroOffset,
                            uint64_t zeroBytes) {
  if (!scratch(arenaBytes, wsFloats)) return -1;
  // A kernel that writes over its input (copy_input) would read its last output next time:
  // the input goes back to zeros, so no run meets denormals or infinities another did not.
  if (zeroBytes) std::memset(static_cast<uint8_t*>(arena_) + zeroOffset, 0, zeroBytes);
  flush_weights(k);
  KernelError err;
  RunCtx c{1, static_cast<uint8_t*>(arena_), static_cast<float*>(ws_), pool_, &err};
  const auto t0 = std::chrono::steady_clock::now();
  k.run(c);
  const double s = seconds_since(t0);
  return err.set ? -1 : s;
}

std::unique_ptr<Kernel> ConvTuner::choose(const BuildCtx& bc, const Op& op, std::unique_ptr<Kernel> rule) {
  const auto* rk = dynamic_cast<const ConvKernel*>(rule.get());
  if (!rk || !avoid_bit(rk->path())) return rule;
  const bool fused = bc.epilogue && bc.epilogue->taken;
  const std::vector<int64_t> key = shape_key(*rk, fused);
  BuildCtx alt = bc;
  // make_conv with `avoid`; nullptr where it fails or fuses differently from the rule's kernel
  // (the ops after the conv are then already accounted for by the rule's choice).
  const auto build = [&](uint32_t avoid) -> std::unique_ptr<Kernel> {
    if (bc.epilogue) bc.epilogue->taken = false;
    alt.conv_avoid = bc.conv_avoid | avoid;
    Status st = Status::kOk;
    std::string msg;
    auto k = make_conv(alt, op, &st, &msg);
    const bool same_fusion = (bc.epilogue && bc.epilogue->taken) == fused;
    if (bc.epilogue) bc.epilogue->taken = fused;
    if (!k || !same_fusion) return nullptr;
    return k;
  };
  if (auto it = decided_.find(key); it != decided_.end()) {
    ++reused_;
    if (it->second == 0) return rule;
    auto k = build(it->second);
    return k ? std::move(k) : std::move(rule);
  }
  const auto t_start = std::chrono::steady_clock::now();
  std::vector<Candidate> cands;
  cands.push_back({std::move(rule), 0});
  // The rule's path, then the one make_conv takes without it, and so on: at most the four
  // spatial paths (the generic im2col ones they fall back to are never faster and are not
  // tried).
  uint32_t avoid = 0;
  for (const char* last = rk->path(); cands.size() < 4 && avoid_bit(last);) {
    avoid |= avoid_bit(last);
    auto k = build(avoid);
    if (!k || !avoid_bit(k->path())) break;
    last = k->path();
    cands.push_back({std::move(k), avoid});
  }
  decided_[key] = 0;
  if (cands.size() == 1) {  // (an alternative refused for its fusion may have packed panels)
    if (bc.panels) bc.panels->drop_unused();
    return std::move(cands[0].kernel);
  }
  const double built_s = seconds_since(t_start);
  const auto g = rk->g;
  const float* w = rk->w;
  const uint64_t wBytes = uint64_t(g.M * g.K()) * sizeof(float);
  const uint64_t arenaBytes = bc.plan->bytesPerSample;
  const uint64_t zeroBytes = rk->copy_input ? uint64_t(g.C * g.H * g.W) * sizeof(float) : 0;
  const ThreadPool::Hot hot(*pool_);
  std::vector<double> best(cands.size(), -1);
  for (size_t i = 0; i < cands.size(); ++i) {
    // (The rule's kernel runs twice: its first run faults in the plan's weights and the
    // scratch, which the others then find resident.)
    if (i == 0) time_once(*cands[i].kernel, cands[i].kernel->workspace_floats(1), arenaBytes, rk->x.offset, zeroBytes);
    const double warm = time_once(*cands[i].kernel, cands[i].kernel->workspace_floats(1), arenaBytes, rk->x.offset, zeroBytes);
    if (i == 0 && (warm < 0 || warm > kMaxWarmupSeconds)) {  // untimed: the rule's kernel
      std::unique_ptr<Kernel> kept = std::move(cands[0].kernel);
      cands.clear();
      if (bc.panels) bc.panels->drop_unused();
      release_scratch();
      untouch_plan_weights(w, wBytes);
      return kept;
    }
    best[i] = warm < 0 ? -2 : warm;  // failed: never kept
  }
  // The warm-ups count as a first round for dropping the clearly slower (a 3x3 conv on a
  // 56x56 map: Winograd at half the others' time), then each timed round.
  for (int r = 0; r < kRounds; ++r) {
    double lead = -1;
    for (double b : best)
      if (b >= 0 && (lead < 0 || b < lead)) lead = b;
    for (size_t i = 0; i < cands.size(); ++i) {
      if (best[i] == -2 || (lead >= 0 && best[i] > lead * kDropAfter)) continue;
      const double s = time_once(*cands[i].kernel, cands[i].kernel->workspace_floats(1), arenaBytes, rk->x.offset, zeroBytes);
      if (s < 0) best[i] = -2;
      else if (best[i] < 0 || s < best[i]) best[i] = s;
    }
  }
  for (double& b : best)
    if (b == -2) b = -1;
  size_t win = pick_conv_candidate(best, kMargin);
  if (const std::string f = forced_path(); !f.empty())
    for (size_t i = 0; i < cands.size(); ++i)
      if (f == cands[i].kernel->path()) win = i;
  if (log_enabled()) {
    std::fprintf(stderr, "[memlane conv tune] %s C%lld %lldx%lld -> M%lld %lldx%lld k%lldx%lld s%lld:", op.name.c_str(),
                 (long long)g.C, (long long)g.H, (long long)g.W, (long long)g.M, (long long)g.OH, (long long)g.OW,
                 (long long)g.kh, (long long)g.kw, (long long)g.sh);
    for (size_t i = 0; i < cands.size(); ++i)
      std::fprintf(stderr, " %s%s %.1f us", i == win ? "*" : "", cands[i].kernel->path(), best[i] * 1e6);
    std::fprintf(stderr, " (built in %.1f ms, tuned in %.1f ms)\n", built_s * 1e3, seconds_since(t_start) * 1e3);
  }
  ++timed_;
  candidates_ += int(cands.size());
  decided_[key] = cands[win].avoid;
  if (win != 0) ++moves_[std::string(cands[0].kernel->path()) + " -> " + cands[win].kernel->path()];
  std::unique_ptr<Kernel> kept = std::move(cands[win].kernel);
  cands.clear();  // the others' repacked weights go now, before the next conv packs its own
  rk = nullptr;   // (the rule's kernel with them, where it lost)
  if (bc.panels) bc.panels->drop_unused();
  release_scratch();
  untouch_plan_weights(w, wBytes);
  seconds_ += seconds_since(t_start);
  return kept;
}

std::string ConvTuner::note() const {
  if (!timed_) return "";
  std::string s = "conv tuning: " + std::to_string(timed_) + " conv shapes timed (" + std::to_string(candidates_) +
                  " kernels, " + std::to_string(int(seconds_ * 1000 + 0.5)) + " ms), " + std::to_string(reused_) +
                  " convs took a timed shape's choice";
  if (moves_.empty()) return s + "; every one kept the rule's path";
  s += "; off the rule's path:";
  bool first = true;
  for (const auto& [m, n] : moves_) {
    s += (first ? " " : ", ") + m + " x" + std::to_string(n);
    first = false;
  }
  return s;
}

}  // namespace memlane::cpu
