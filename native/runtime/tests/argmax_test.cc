// ArgMax (CLIP's text pooling) through the CPU backend with 2 threads, against a reference
// computed here: float32 along a middle and the last axis, int32 and int64 with ties (the
// first maximum, or the last with select_last_index), keepdims' shape, a seq-first input, and
// the plans refused at load (the batch axis, a bool input, a corrupt flag).
#include <cstdint>
#include <vector>

#include "harness.h"
#include "op_runner.h"
#include "plan/plan.h"

using namespace mltest;
using memlane::Status;
using I64 = std::vector<int64_t>;
using I32 = std::vector<int32_t>;
using F = std::vector<float>;

namespace {

// The reference: x [outer, len, inner], the index of each column's maximum along len.
template <typename T>
I64 argmax_ref(const std::vector<T>& x, int64_t outer, int64_t len, int64_t inner, bool last) {
  I64 y(size_t(outer * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        const T v = x[size_t((o * len + j) * inner + c)], top = x[size_t((o * len + best) * inner + c)];
        if (v > top || (last && v == top)) best = j;
      }
      y[size_t(o * inner + c)] = best;
    }
  return y;
}

Attrs argmax_attrs(int64_t axis, bool keepdims, bool last) {
  return {{"axis", axis}, {"keepdims", int64_t(keepdims)}, {"select_last_index", int64_t(last)}};
}

void test_float_axes() {
  const int64_t N = 3, S = 5, E = 4;
  F xs(size_t(N * S * E));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i * 37 % 23) - 11) * 0.25f;
  PlanBuilder b;
  int x = b.tensor("x", {-1, S, E}, "input");
  int y1 = b.tensor("y1", {-1, 1, E}, "output", "int64"), y2 = b.tensor("y2", {-1, S}, "output", "int64");
  b.op("ArgMax", {x}, {y1}, argmax_attrs(1, true, false));
  b.op("ArgMax", {x}, {y2}, argmax_attrs(2, false, false));
  RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK(r.out<int64_t>(0) == argmax_ref(xs, N, S, E, false));
  CHECK(r.out<int64_t>(1) == argmax_ref(xs, N * S, E, 1, false));
}

void test_integer_ties() {
  // CLIP: argmax(int32(ids == eos)) along the sequence; several maxima in a row.
  const int64_t N = 2, S = 6;
  const I32 hits = {0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  const I64 ids = {4, 9, 9, 2, 9, 1, -3, -3, -7, -3, -9, -8};
  for (bool last : {false, true}) {
    PlanBuilder b;
    int h = b.tensor("h", {-1, S}, "input", "int32"), x = b.tensor("x", {-1, S}, "input", "int64");
    int y1 = b.tensor("y1", {-1}, "output", "int64"), y2 = b.tensor("y2", {-1}, "output", "int64");
    b.op("ArgMax", {h}, {y1}, argmax_attrs(1, false, last));
    b.op("ArgMax", {x}, {y2}, argmax_attrs(1, false, last));
    RawResult r = run_raw(b, N, {bytes_of(hits), bytes_of(ids)}, 2, 4);
    CHECK_MSG(r.status == Status::kOk, r.message);
    CHECK(r.out<int64_t>(0) == (last ? I64{3, 5} : I64{1, 0}));  // an all-zero row: 0, or its last
    CHECK(r.out<int64_t>(1) == (last ? I64{4, 3} : I64{1, 0}));
    CHECK(r.out<int64_t>(1) == argmax_ref(ids, N, S, 1, last));
  }
}

void test_seq_first() {
  // x [S, batch, E] (the batch on axis 1), along the sequence.
  const int64_t N = 2, S = 4, E = 3;
  F xs(size_t(N * S * E));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i * 5 % 7));
  PlanBuilder b;
  int x = b.tensor("x", {S, -1, E}, "input");
  int y = b.tensor("y", {-1, E}, "output", "int64");
  b.op("ArgMax", {x}, {y}, argmax_attrs(0, false, true));
  RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK(r.out<int64_t>(0) == argmax_ref(xs, 1, S, N * E, true));
}

void test_refusals() {
  {  // along the batch: across samples
    PlanBuilder b;
    int x = b.tensor("x", {-1, 4}, "input"), y = b.tensor("y", {-1, 4}, "output", "int64");
    b.op("ArgMax", {x}, {y}, argmax_attrs(0, true, false));
    RawResult r = run_raw(b, 1, {bytes_of(F(4))});
    CHECK(r.status == Status::kUnsupportedOp);
    CHECK_CONTAINS(r.message, "axis 0 is out of range or the batch of [-1,4]");
  }
  {  // a bool input
    PlanBuilder b;
    int x = b.tensor("x", {-1, 4}, "input", "bool"), y = b.tensor("y", {-1}, "output", "int64");
    b.op("ArgMax", {x}, {y}, argmax_attrs(1, false, false));
    RawResult r = run_raw(b, 1, {std::vector<uint8_t>(4)});
    CHECK(r.status == Status::kUnsupportedOp);
    CHECK_CONTAINS(r.message, "input is bool; ArgMax compares float32, int64 or int32");
  }
  {  // the reader takes select_last_index as 0 or 1 only
    PlanBuilder b;
    int x = b.tensor("x", {-1, 4}, "input"), y = b.tensor("y", {-1}, "output", "int64");
    b.op("ArgMax", {x}, {y}, Attrs{{"axis", int64_t(1)}, {"keepdims", int64_t(0)}, {"select_last_index", int64_t(2)}});
    RawResult r = run_raw(b, 1, {bytes_of(F(4))});
    CHECK(r.status != Status::kOk);
    CHECK_CONTAINS(r.message, ".attrs.select_last_index");
  }
}

}  // namespace

int main() {
  test_float_axes();
  test_integer_ties();
  test_seq_first();
  test_refusals();
  return finish("argmax_test");
}
