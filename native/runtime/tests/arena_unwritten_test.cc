// The arena bytes a sample no kernel writes (cpu/arena_unwritten.h), as the CPU backend reports
// them after its load-time fusions: a fused MatMul -> Add(bias) -> Gelu never writes the
// product or the biased sum; run apart (MEMLANE_NO_FUSION=1), or with the sum read again, every
// tensor is written. memlane estimate's native load probe reads this figure.
#include <cstdlib>

#include "harness.h"
#include "op_runner.h"

using namespace mltest;

static uint64_t unwritten(const PlanBuilder& pb, int64_t maxBatch) {
  memlane::BackendOptions o;
  o.tuneConvs = false;
  auto p = prepare_plan(pb, maxBatch, o);
  return p->backend ? p->backend->memory_stats().arenaUnwrittenBytesPerSample : 0;
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
  return finish("arena_unwritten_test");
}
