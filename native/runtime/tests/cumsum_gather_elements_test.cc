// CumSum and GatherElements (RoBERTa-family position ids): each against a reference computed
// here, through the CPU backend with 2 threads. CumSum inclusive / exclusive / reverse on
// float32, int64 (wrapping) and int32, on the batch-first and seq-first layouts and along the
// batch axis; GatherElements from an activation, a weight and along the batch axis, negative
// indices, an index out of range (a request error naming it), and the plans refused at load.
// Along the batch axis both ops reach across samples: a batch of 5 on 2 threads would run in
// two lanes of samples if the backend chunked it (cpu_backend.cc `mixes_samples`).
#include <cstdint>
#include <limits>
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

// The reference: x [outer, len, inner] summed along len, in order, in T.
template <typename T>
std::vector<T> cumsum_ref(const std::vector<T>& x, int64_t outer, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  std::vector<T> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      T sum = T(0);
      for (int64_t s = 0; s < len; ++s) {
        const size_t at = size_t((o * len + (reverse ? len - 1 - s : s)) * inner + c);
        if (!exclusive) sum = T(sum + x[at]);
        y[at] = sum;
        if (exclusive) sum = T(sum + x[at]);
      }
    }
  return y;
}

F ramp(size_t n, float scale) {
  F v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7 % 11) - 5) + 0.125f * float(i);
  return v;
}

Attrs cumsum_attrs(int64_t axis, bool exclusive, bool reverse) {
  return {{"axis", axis}, {"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}};
}

void test_cumsum_float_flags() {
  // x [batch, 5, 3] along axis 1 (inner 3) and axis 2 (the last), every flag combination.
  const int64_t N = 3, S = 5, E = 3;
  const F xs = ramp(size_t(N * S * E), 0.75f);
  for (int flags = 0; flags < 4; ++flags) {
    const bool ex = flags & 1, rev = flags & 2;
    PlanBuilder b;
    int x = b.tensor("x", {-1, S, E}, "input");
    int y1 = b.tensor("y1", {-1, S, E}, "output"), y2 = b.tensor("y2", {-1, S, E}, "output");
    b.op("CumSum", {x}, {y1}, cumsum_attrs(1, ex, rev));
    b.op("CumSum", {x}, {y2}, cumsum_attrs(2, ex, rev));
    RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
    CHECK_MSG(r.status == Status::kOk, r.message);
    // The same order of additions as ONNX Runtime's: equal floats, not merely close ones.
    CHECK_MSG(r.out<float>(0) == cumsum_ref(xs, N, S, E, ex, rev), "axis 1 flags " + std::to_string(flags));
    CHECK_MSG(r.out<float>(1) == cumsum_ref(xs, N * S, E, 1, ex, rev), "axis 2 flags " + std::to_string(flags));
  }
}

void test_cumsum_integers() {
  // RoBERTa: cumsum(int32 mask) along the sequence; int64 wraps as two's complement.
  const int64_t N = 2, S = 6;
  const I32 mask = {1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0};
  PlanBuilder b;
  int m = b.tensor("mask", {-1, S}, "input", "int32");
  int p = b.tensor("pos", {-1, S}, "output", "int32");
  b.op("CumSum", {m}, {p}, cumsum_attrs(1, false, false));
  int x = b.tensor("x", {-1, 3}, "input", "int64");
  int y = b.tensor("y", {-1, 3}, "output", "int64");
  b.op("CumSum", {x}, {y}, cumsum_attrs(1, true, true));
  const int64_t big = std::numeric_limits<int64_t>::max();
  const I64 xs = {5, big, 1, -4, 2, 7};
  RawResult r = run_raw(b, N, {bytes_of(mask), bytes_of(xs)}, 2, 2);
  CHECK_MSG(r.status == Status::kOk, r.message);
  CHECK((r.out<int32_t>(0) == I32{1, 2, 3, 3, 3, 3, 1, 2, 3, 4, 5, 5}));
  // exclusive + reverse: [big + 1, 1, 0] with big + 1 wrapped to the minimum; [9, 7, 0].
  CHECK((r.out<int64_t>(1) == I64{std::numeric_limits<int64_t>::min(), 1, 0, 9, 7, 0}));
}

void test_cumsum_seq_first_and_batch_axis() {
  // x [4, batch, 2] (seq-first) along axis 0 and axis 2; and along the batch axis itself, in a
  // batch-first plan of 5 samples on 2 threads: the sum runs over all five.
  const int64_t S = 4, N = 3, E = 2;
  {
    const F xs = ramp(size_t(S * N * E), 0.5f);
    PlanBuilder b;
    int x = b.tensor("x", {S, -1, E}, "input");
    int y0 = b.tensor("y0", {S, -1, E}, "output"), y2 = b.tensor("y2", {S, -1, E}, "output");
    b.op("CumSum", {x}, {y0}, cumsum_attrs(0, false, true));
    b.op("CumSum", {x}, {y2}, cumsum_attrs(2, true, false));
    RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
    CHECK_MSG(r.status == Status::kOk, r.message);
    CHECK(r.out<float>(0) == cumsum_ref(xs, 1, S, N * E, false, true));
    CHECK(r.out<float>(1) == cumsum_ref(xs, S * N, E, 1, true, false));
  }
  {
    const int64_t B = 5;
    I64 xs(size_t(B * 3));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = int64_t(i) - 4;
    PlanBuilder b;
    int x = b.tensor("x", {-1, 3}, "input", "int64");
    int y = b.tensor("y", {-1, 3}, "output", "int64");
    b.op("CumSum", {x}, {y}, cumsum_attrs(0, false, false));
    RawResult r = run_raw(b, B, {bytes_of(xs)}, 2, B);
    CHECK_MSG(r.status == Status::kOk, r.message);
    CHECK(r.out<int64_t>(0) == cumsum_ref(xs, 1, B, 3, false, false));
  }
}

void test_gather_elements() {
  const int64_t N = 3;
  PlanBuilder b;
  // transformers' token types: a [batch, 6] buffer at [batch, 4] positions (int64), negative
  // positions from the end.
  int buf = b.tensor("buf", {-1, 6}, "input", "int64");
  int pos = b.tensor("pos", {-1, 4}, "input", "int64");
  int tt = b.tensor("tt", {-1, 4}, "output", "int64");
  b.op("GatherElements", {buf, pos}, {tt}, Attrs{{"axis", int64_t(1)}});
  // A weight [4, 3] by rows per element (axis 0), int32 indices [batch, 3].
  const F w = ramp(12, 1.f);
  int W = b.weight("w", {4, 3}, w);
  int rows = b.tensor("rows", {-1, 3}, "input", "int32");
  int wy = b.tensor("wy", {-1, 3}, "output");
  b.op("GatherElements", {W, rows}, {wy}, Attrs{{"axis", int64_t(0)}});
  // An activation [batch, 4, 3] at [batch, 2, 3] indices on the last axis (axis 1 smaller).
  int d3 = b.tensor("d3", {-1, 4, 3}, "input");
  int i3 = b.tensor("i3", {-1, 2, 3}, "input", "int64");
  int y3 = b.tensor("y3", {-1, 2, 3}, "output");
  b.op("GatherElements", {d3, i3}, {y3}, Attrs{{"axis", int64_t(2)}});

  I64 bufs(size_t(N * 6)), poss = {0, 5, -1, -6, 2, 3, 4, 1, 1, 1, -2, 0};
  for (size_t i = 0; i < bufs.size(); ++i) bufs[i] = int64_t(100 + i);
  const I32 rowss = {3, -4, 1, 0, 2, -1, -1, -1, -1};
  const F d3s = ramp(size_t(N * 12), 0.5f);
  I64 i3s(size_t(N * 6));
  for (size_t i = 0; i < i3s.size(); ++i) i3s[i] = int64_t(i * 5 % 6) - 3;  // -3..2
  RawResult r = run_raw(b, N, {bytes_of(bufs), bytes_of(poss), bytes_of(rowss), bytes_of(d3s), bytes_of(i3s)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  I64 wt;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < 4; ++j) {
      int64_t k = poss[size_t(n * 4 + j)];
      wt.push_back(bufs[size_t(n * 6 + (k < 0 ? k + 6 : k))]);
    }
  CHECK(r.out<int64_t>(0) == wt);
  F ww;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < 3; ++j) {
      int64_t k = rowss[size_t(n * 3 + j)];
      ww.push_back(w[size_t((k < 0 ? k + 4 : k) * 3 + j)]);
    }
  CHECK(r.out<float>(1) == ww);
  F w3;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        int64_t k = i3s[size_t((n * 2 + i) * 3 + j)];
        w3.push_back(d3s[size_t((n * 4 + i) * 3 + (k < 0 ? k + 3 : k))]);
      }
  CHECK(r.out<float>(2) == w3);

  // One position past the buffer fails the request, naming the op, the index and where.
  poss[5] = 6;
  RawResult e = run_raw(b, N, {bytes_of(bufs), bytes_of(poss), bytes_of(rowss), bytes_of(d3s), bytes_of(i3s)}, 2, 4);
  CHECK(e.status == Status::kInvalidArgument);
  CHECK_CONTAINS(e.message, "op GatherElements 'GatherElements_0': index 6 is out of range [-6, 6) of data axis 1 at flat position 5");
}

void test_gather_elements_batch_axis() {
  // Along the batch axis the indices are sample numbers of the whole batch: 5 samples on 2
  // threads, each sample reading its mirror image.
  const int64_t B = 5;
  PlanBuilder b;
  int d = b.tensor("d", {-1, 2}, "input");
  int i = b.tensor("i", {-1, 2}, "input", "int64");
  int y = b.tensor("y", {-1, 2}, "output");
  b.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(0)}});
  const F ds = ramp(size_t(B * 2), 1.f);
  I64 is;
  for (int64_t n = 0; n < B; ++n) is.insert(is.end(), {B - 1 - n, -1 - n});
  RawResult r = run_raw(b, B, {bytes_of(ds), bytes_of(is)}, 2, B);
  CHECK_MSG(r.status == Status::kOk, r.message);
  F want;
  for (int64_t n = 0; n < B; ++n) want.insert(want.end(), {ds[size_t((B - 1 - n) * 2)], ds[size_t((B - 1 - n) * 2 + 1)]});
  CHECK(r.out<float>(0) == want);
}

void test_refusals() {
  {  // indices larger than the data off the gathered axis
    PlanBuilder b;
    int d = b.tensor("d", {-1, 2, 3}, "input"), i = b.tensor("i", {-1, 3, 3}, "input", "int64");
    int y = b.tensor("y", {-1, 3, 3}, "output");
    b.op("GatherElements", {d, i}, {y}, Attrs{{"axis", int64_t(2)}});
    RawResult r = run_raw(b, 1, {bytes_of(F(6)), bytes_of(I64(9))});
    CHECK(r.status == Status::kUnsupportedOp);
    CHECK_CONTAINS(r.message, "indices [-1,3,3] exceed data [-1,2,3] on axis 1 (only axis 2 may differ)");
  }
  {  // a bool CumSum
    PlanBuilder b;
    int x = b.tensor("x", {-1, 4}, "input", "bool"), y = b.tensor("y", {-1, 4}, "output", "bool");
    b.op("CumSum", {x}, {y}, cumsum_attrs(1, false, false));
    RawResult r = run_raw(b, 1, {std::vector<uint8_t>(4)});
    CHECK(r.status == Status::kUnsupportedOp);
    CHECK_CONTAINS(r.message, "input is bool; CumSum sums float32, int64 or int32");
  }
  {  // the reader takes ONNX's flags as 0 or 1 only
    PlanBuilder b;
    int x = b.tensor("x", {-1, 4}, "input"), y = b.tensor("y", {-1, 4}, "output");
    b.op("CumSum", {x}, {y}, Attrs{{"axis", int64_t(1)}, {"exclusive", int64_t(2)}, {"reverse", int64_t(0)}});
    RawResult r = run_raw(b, 1, {bytes_of(F(4))});
    CHECK(r.status != Status::kOk);
    CHECK_CONTAINS(r.message, ".attrs.exclusive");
    CHECK_CONTAINS(r.message, "0 or 1");
  }
}

}  // namespace

int main() {
  test_cumsum_float_flags();
  test_cumsum_integers();
  test_cumsum_seq_first_and_batch_axis();
  test_gather_elements();
  test_gather_elements_batch_axis();
  test_refusals();
  return finish("cumsum_gather_elements_test");
}
