// The CPU backend gives back the plan pages of weights that only a kernel's repacked copy reads
// (cpu/weight_release.h): checked on this process's page table (/proc/self/pagemap's present
// bit; mincore would report the file's page cache, which DONTNEED keeps), with the outputs
// unchanged against the same plan parsed from anonymous memory (where nothing may be dropped),
// and again after the released pages are read back (refaulted from the file).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu/cpu_features.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using namespace memlane;
using V = std::vector<float>;
using S = std::vector<int64_t>;

namespace {

// Pages wholly inside [p, p + bytes) that this process has mapped (-1: pagemap unreadable).
int present_pages(const void* p, uint64_t bytes) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE)), a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (a + page - 1) / page, hi = (a + bytes) / page;
  const int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return -1;
  int n = 0;
  for (uintptr_t pg = lo; pg < hi; ++pg) {
    uint64_t e = 0;
    if (pread(fd, &e, 8, off_t(pg * 8)) != 8) {
      n = -1;
      break;
    }
    n += int(e >> 63);  // bit 63: page present
  }
  close(fd);
  return n;
}

int interior_pages(const void* p, uint64_t bytes) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE)), a = reinterpret_cast<uintptr_t>(p);
  return int((a + bytes) / page - (a + page - 1) / page);
}

const TensorInfo& named(const Plan& p, const std::string& name) {
  for (const auto& t : p.tensors)
    if (t.name == name) return t;
  std::fprintf(stderr, "no tensor %s\n", name.c_str());
  std::abort();
}

// x1 [64,7,7] -1x1 w1-> [256,7,7] -5x5 dw w2-> y1 (channels-in-lanes, then blocked depthwise:
// both repack); x1 -1x1 ws-> y2 (lanes) and x2 [64,40,40] -1x1 ws-> y3 (1600 pixels: the
// pixels-in-lanes product reads ws itself, so ws must stay). Unread 128 KiB weights lie
// between them: a read fault maps the page-cached pages of its 64 KiB neighbourhood too
// (the kernel's fault-around), which would map a released neighbour back.
PlanBuilder model(Rng& rng) {
  PlanBuilder pb;
  int x1 = pb.input("x1", {64, 7, 7}), x2 = pb.input("x2", {64, 40, 40});
  auto gap = [&](const char* name) { pb.weight(name, {32768}, V(32768, 0.f)); };
  int w1 = pb.weight("w1", {256, 64, 1, 1}, rng.vec(256 * 64));
  gap("gap1");
  int w2 = pb.weight("w2", {256, 1, 5, 5}, rng.vec(256 * 25));
  int b2 = pb.weight("b2", {256}, rng.vec(256));
  gap("gap2");
  int ws = pb.weight("ws", {64, 64, 1, 1}, rng.vec(64 * 64));
  int a = pb.act("a", {256, 7, 7});
  int y1 = pb.output("y1", {256, 7, 7}), y2 = pb.output("y2", {64, 7, 7}), y3 = pb.output("y3", {64, 40, 40});
  const Attrs one = {{"kernel", S{1, 1}}};
  pb.op("Conv", {x1, w1, -1}, {a}, one);
  pb.op("Conv", {a, w2, b2}, {y1}, {{"kernel", S{5, 5}}, {"pads", S{2, 2, 2, 2}}, {"group", int64_t(256)}});
  pb.op("Conv", {x1, ws, -1}, {y2}, one);
  pb.op("Conv", {x2, ws, -1}, {y3}, one);
  return pb;
}

std::vector<V> run(Backend& be, const std::vector<V>& in, const PlanBuilder& pb) {
  std::vector<V> out;
  std::vector<float*> outp;
  for (int64_t id : pb.outputs) out.emplace_back(size_t(pb.tensors[size_t(id)].bytes / 4), -1.f);
  for (auto& o : out) outp.push_back(o.data());
  std::vector<const float*> inp = {in[0].data(), in[1].data()};
  std::string msg;
  CHECK_MSG(be.run(1, inp.data(), outp.data(), &msg) == Status::kOk, msg);
  return out;
}

}  // namespace

int main() {
  if (!cpu::use_avx512f()) {
    std::printf("weight_release_test: skipped (no AVX-512F or MEMLANE_CPU_NO_AVX512: no kernel repacks)\n");
    return finish("weight_release_test");
  }
  Rng rng;
  const PlanBuilder pb = model(rng);
  const std::vector<V> in = {rng.vec(64 * 49), rng.vec(64 * 1600)};
  const std::vector<uint8_t> bytes = pb.build();
  std::string msg;
  Status st;

  // Reference: the plan parsed from heap memory, which must not be dropped (it would read 0).
  Plan heap;
  CHECK_MSG(parse_plan(bytes.data(), bytes.size(), &heap, &msg) == Status::kOk, msg);
  auto ref_be = make_cpu_backend(BackendOptions{}, &st, &msg);
  CHECK_MSG(ref_be->prepare(heap, 1, &msg) == Status::kOk, msg);
  CHECK_CONTAINS(ref_be->notes(), "repacked weights: 2 tensors kept (weights are in");
  const std::vector<V> want = run(*ref_be, in, pb);

  char path[] = "/tmp/memlane-release-XXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
  close(fd);
  std::unique_ptr<PlanFile> file;
  CHECK_MSG(read_plan(path, &file, &msg) == Status::kOk, msg);
  unlink(path);
  if (!file) return finish("weight_release_test");
  const Plan& plan = file->plan();
  const TensorInfo &w1 = named(plan, "w1"), &w2 = named(plan, "w2"), &ws = named(plan, "ws");
  V w1_copy(w1.data, w1.data + w1.bytes / 4);
  CHECK(interior_pages(w1.data, w1.bytes) >= 15 && interior_pages(w2.data, w2.bytes) >= 5);

  auto be = make_cpu_backend(BackendOptions{}, &st, &msg);
  CHECK_MSG(be->prepare(plan, 1, &msg) == Status::kOk, msg);
  CHECK_CONTAINS(be->notes(), "repacked weights: 2 tensors");
  CHECK_MSG(present_pages(w1.data, w1.bytes) == 0, "w1 pages still present: " + be->notes());
  CHECK_MSG(present_pages(w2.data, w2.bytes) == 0, "w2 pages still present: " + std::to_string(present_pages(w2.data, w2.bytes)) + " of " + std::to_string(interior_pages(w2.data, w2.bytes)) + ", " + be->notes());
  CHECK_MSG(present_pages(ws.data, ws.bytes) == interior_pages(ws.data, ws.bytes), "ws released though a kernel reads it at run time");
  const std::vector<V> got = run(*be, in, pb);
  CHECK(got == want);  // the same kernels on the same floats: bit for bit
  CHECK_MSG(present_pages(w1.data, w1.bytes) == 0, "a run read w1's plan pages");
  CHECK_MSG(present_pages(w2.data, w2.bytes) == 0, "a run read w2's plan pages");

  // Touching the released pages refaults them from the file: the same floats come back.
  CHECK(std::memcmp(w1_copy.data(), w1.data, w1.bytes) == 0);
  CHECK(present_pages(w1.data, w1.bytes) == interior_pages(w1.data, w1.bytes));
  CHECK(run(*be, in, pb) == want);

  // MEMLANE_CPU_KEEP_WEIGHTS=1 keeps them (the A/B aid).
  setenv("MEMLANE_CPU_KEEP_WEIGHTS", "1", 1);
  auto keep = make_cpu_backend(BackendOptions{}, &st, &msg);
  CHECK_MSG(keep->prepare(plan, 1, &msg) == Status::kOk, msg);
  CHECK_CONTAINS(keep->notes(), "repacked weights: 2 tensors kept (MEMLANE_CPU_KEEP_WEIGHTS=1)");
  CHECK(present_pages(w2.data, w2.bytes) > 0);  // read by its pack, not given back
  unsetenv("MEMLANE_CPU_KEEP_WEIGHTS");
  return finish("weight_release_test");
}
