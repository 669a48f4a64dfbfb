// The arena bytes a sample no kernel writes (cpu/arena_unwritten.h), as the CPU backend reports
// them after its load-time fusions: a fused MatMul -> Add(bias) -> Gelu never writes the
// product or the biased sum; run apart (MEMLANE_NO_FUSION=1), or with the sum read again, every
// tensor is written. memlane estimate's native load probe reads this figure.
#include <cstdlib>

#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using S = std::vector<int64_t>;

static uint64_t unwritten(const PlanBuilder& pb, int64_t maxBatch) {
  memlane::BackendOptions o;
  o.tuneConvs = false;
  auto p = prepare_plan(pb, maxBatch, o);
  return p->backend ? p->backend->memory_stats().arenaUnwrittenBytesPerSample : 0;
}

// The batch tail's own figures (cpu/batch_tail.h): its arena's unwritten bytes and its kernels'
// workspace curve, reported from a load at any maxBatch (memlane estimate's probe loads at 1).
static memlane::MemoryStats stats(const PlanBuilder& pb, int64_t maxBatch) {
  memlane::BackendOptions o;
  o.tuneConvs = false;
  auto p = prepare_plan(pb, maxBatch, o);
  return p->backend ? p->backend->memory_stats() : memlane::MemoryStats{};
}

static void expect(const char* label, uint64_t found, uint64_t expected) {
  CHECK_MSG(found == expected, std::string(label) + ": expected " + std::to_string(expected) + " unwritten bytes a sample, found " + std::to_string(found));
}

static PlanBuilder dense(Rng& rng, bool sum_read_again) {
  PlanBuilder pb;
  int x = pb.input("x", {16, 24});
  int w = pb.weight("w", {24, 40}, rng.vec(24 * 40));
  int b = pb.weight("b", {40}, rng.vec(40));
  int m = pb.act("m", {16, 40});
  int s = sum_read_again ? pb.output("s", {16, 40}) : pb.act("s", {16, 40});
  int y = pb.output("y", {16, 40});
  pb.op("MatMul", {x, w}, {m});
  pb.op("Add", {b, m}, {s});
  pb.op("Gelu", {s}, {y});
  return pb;
}

// A classifier's head as the batch tail (batch_tail_test.cc's late conv): Relu (the prefix),
// then a 1x1 conv 512 -> 512 (1 MiB of weights) whose Relu the backend fuses into its epilogue,
// GlobalAveragePool, Flatten, Gemm 512 -> 10. The conv's own output (32 KiB a sample) is never
// written.
static PlanBuilder head(Rng& rng) {
  PlanBuilder b;
  const int x = b.input("x", {512, 4, 4});
  const int xr = b.act("xr", {512, 4, 4});
  const int cw = b.weight("cw", {512, 512, 1, 1}, rng.vec(512 * 512));
  const int y = b.act("y", {512, 4, 4});
  const int yr = b.act("yr", {512, 4, 4});
  const int p = b.act("p", {512, 1, 1});
  const int f = b.act("f", {512});
  const int w = b.weight("w", {10, 512}, rng.vec(10 * 512));
  const int logits = b.output("logits", {10});
  b.op("Relu", {x}, {xr});
  b.op("Conv", {xr, cw, -1}, {y}, {{"kernel", S{1, 1}}, {"strides", S{1, 1}}, {"pads", S{0, 0, 0, 0}}, {"activation", std::string("none")}});
  b.op("Relu", {y}, {yr});
  b.op("GlobalAveragePool", {yr}, {p});
  b.op("Flatten", {p}, {f}, {{"axis", int64_t(1)}});
  b.op("Gemm", {f, w}, {logits}, {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t(0)}, {"transB", int64_t(1)}, {"activation", std::string("none")}});
  return b;
}

int main() {
  Rng rng;
  const uint64_t tensor = 16 * 40 * 4;  // m's and s's bytes a sample (a multiple of 64)
  unsetenv("MEMLANE_NO_FUSION");
  // Fused: m and s have arena space of their own (the builder lays tensors end to end) and
  // are never written; x and y are.
  expect("fused", unwritten(dense(rng, false), 1), 2 * tensor);
  expect("fused, max batch 8", unwritten(dense(rng, false), 8), 2 * tensor);  // a figure a sample, whatever the batch
  // s read again (a graph output): the MatMul takes the bias alone and writes s; m stays unwritten.
  expect("sum read again", unwritten(dense(rng, true), 1), tensor);
  setenv("MEMLANE_NO_FUSION", "1", 1);
  expect("MEMLANE_NO_FUSION=1", unwritten(dense(rng, false), 1), 0);
  unsetenv("MEMLANE_NO_FUSION");
  // The tail: reported at maxBatch 1 (nothing split) as at 8, and only its fused tensors unwritten.
  for (int64_t maxBatch : {int64_t(1), int64_t(8)}) {
    const memlane::MemoryStats st = stats(head(rng), maxBatch);
    const std::string at = " (max batch " + std::to_string(maxBatch) + ")";
    CHECK_MSG(st.batchTailBytesPerSample > 0, "the head is a batch tail" + at);
    CHECK_MSG(st.batchTailUnwrittenBytesPerSample > 0 && st.batchTailUnwrittenBytesPerSample <= 512 * 16 * 4,
              "tail unwritten" + at + ": expected 1 .. " + std::to_string(512 * 16 * 4) + " bytes (the conv's output), found " +
                  std::to_string(st.batchTailUnwrittenBytesPerSample));
    CHECK_MSG(st.batchTailUnwrittenBytesPerSample < st.batchTailBytesPerSample, "the tail's output is written" + at);
    CHECK_MSG(st.batchTailWorkspaceBytesByBatch.size() == size_t(memlane::kWorkspaceCurvePoints), "one tail workspace point a batch" + at);
  }
  // No tail (the dense block's weights are 3.8 KiB): no tail figures.
  const memlane::MemoryStats none = stats(dense(rng, false), 8);
  expect("no tail", none.batchTailUnwrittenBytesPerSample, 0);
  CHECK_MSG(none.batchTailWorkspaceBytesByBatch.empty(), "no tail: no tail workspace curve");
  setenv("MEMLANE_NO_FUSION", "1", 1);
  expect("tail, MEMLANE_NO_FUSION=1", stats(head(rng), 1).batchTailUnwrittenBytesPerSample, 0);
  unsetenv("MEMLANE_NO_FUSION");
  return finish("arena_unwritten_test");
}
