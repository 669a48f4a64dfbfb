// The batch tail (see batch_tail.h): which ops, and the tail's own arena.
#include "cpu/batch_tail.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace memlane::cpu {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t aligned(uint64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

bool present(int32_t id) { return id != kAbsentInput && id >= 0; }

// Bytes of the op's weights (each tensor once) and of its activations for one sample.
struct OpBytes {
  uint64_t weights = 0, activations = 0;
};
OpBytes op_bytes(const Plan& plan, const Op& op) {
  std::set<int32_t> seen;
  OpBytes b;
  auto add = [&](int32_t id) {
    if (!present(id) || !seen.insert(id).second) return;
    const TensorInfo& t = plan.tensors[size_t(id)];
    (t.is_weight() ? b.weights : b.activations) += t.bytes;
  };
  for (int32_t id : op.inputs) add(id);
  for (int32_t id : op.outputs) add(id);
  return b;
}

bool is_graph_output(const Plan& plan, int32_t id) {
  return std::find(plan.outputs.begin(), plan.outputs.end(), id) != plan.outputs.end();
}

// Bytes per sample of the plan's activations alive at each op (a tensor from its writer, graph
// inputs from op 0, to its last reader, graph outputs to the end): at op j >= s this bounds
// what a tail from s holds at j from above.
std::vector<uint64_t> live_bytes(const Plan& plan) {
  const size_t n = plan.ops.size();
  std::vector<int64_t> born(plan.tensors.size(), -1), dies(plan.tensors.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t id : plan.ops[i].outputs)
      if (present(id) && born[size_t(id)] < 0) born[size_t(id)] = int64_t(i);
    for (int32_t id : plan.ops[i].inputs)
      if (present(id)) dies[size_t(id)] = int64_t(i);
  }
  for (int32_t id : plan.inputs) born[size_t(id)] = 0;
  for (int32_t id : plan.outputs) dies[size_t(id)] = int64_t(n) - 1;
  std::vector<int64_t> delta(n + 1, 0);
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    if (plan.tensors[t].is_weight() || born[t] < 0) continue;
    const int64_t d = std::max(dies[t], born[t]);
    delta[size_t(born[t])] += int64_t(aligned(plan.tensors[t].bytes));
    delta[size_t(d) + 1] -= int64_t(aligned(plan.tensors[t].bytes));
  }
  std::vector<uint64_t> live(n);
  int64_t cur = 0;
  for (size_t i = 0; i < n; ++i) live[i] = uint64_t(cur += delta[i]);
  return live;
}

// Whether op i may join the tail: its weights outweigh its activations a sample, so the whole
// batch reusing them pays (see batch_tail.h).
bool worth_whole_batch(const Plan& plan, const Op& op) {
  const OpBytes b = op_bytes(plan, op);
  return b.weights == 0 || b.weights >= b.activations;
}

}  // namespace

Plan tail_plan(const Plan& plan, size_t start) {
  Plan t = plan;
  // Its activations get places of their own below, Concat inputs too: its Concats copy.
  t.concatInPlace = false;
  t.ops.assign(plan.ops.begin() + std::ptrdiff_t(start), plan.ops.end());
  const size_t n = t.ops.size();
  // Lifetimes in tail op indices; tensors from the prefix and graph inputs from tail op 0.
  std::vector<int64_t> born(plan.tensors.size(), -1), dies(plan.tensors.size(), -1);
  std::vector<int32_t> ids;
  std::set<int32_t> written;
  auto touch = [&](int32_t id) {
    if (!present(id) || plan.tensors[size_t(id)].is_weight()) return false;
    if (born[size_t(id)] < 0 && dies[size_t(id)] < 0) ids.push_back(id);
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    for (int32_t id : t.ops[i].inputs)
      if (touch(id)) {
        if (born[size_t(id)] < 0) born[size_t(id)] = 0;  // read before any tail op writes it
        dies[size_t(id)] = int64_t(i);
      }
    for (int32_t id : t.ops[i].outputs)
      if (touch(id)) {
        if (born[size_t(id)] < 0) born[size_t(id)] = int64_t(i);
        written.insert(id);
      }
  }
  t.outputs.clear();
  t.inputs.clear();
  for (int32_t id : ids) {
    if (is_graph_output(plan, id)) dies[size_t(id)] = int64_t(n) - 1;
    dies[size_t(id)] = std::max(dies[size_t(id)], born[size_t(id)]);
  }
  for (int32_t id : plan.outputs)
    if (written.count(id)) t.outputs.push_back(id);
  // First fit, largest first: each tensor at the lowest offset clear of every placed tensor
  // whose lifetime meets its own.
  std::vector<int32_t> order = ids;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return plan.tensors[size_t(a)].bytes > plan.tensors[size_t(b)].bytes; });
  struct Placed {
    uint64_t off, end;
    int64_t born, dies;
  };
  std::vector<Placed> placed;
  uint64_t top = 0;
  for (int32_t id : order) {
    const uint64_t bytes = aligned(t.tensors[size_t(id)].bytes);
    const int64_t b = born[size_t(id)], d = dies[size_t(id)];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed& p : placed)
      if (p.born <= d && b <= p.dies) busy.emplace_back(p.off, p.end);
    std::sort(busy.begin(), busy.end());
    uint64_t off = 0;
    for (const auto& [s, e] : busy) {
      if (off + bytes <= s) break;
      off = std::max(off, e);
    }
    placed.push_back({off, off + bytes, b, d});
    t.tensors[size_t(id)].offset = off;
    top = std::max(top, off + bytes);
  }
  t.bytesPerSample = top;
  t.lowerBoundPerSample = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t alive = 0;
    for (int32_t id : ids)
      if (born[size_t(id)] <= int64_t(i) && int64_t(i) <= dies[size_t(id)]) alive += aligned(t.tensors[size_t(id)].bytes);
    t.lowerBoundPerSample = std::max(t.lowerBoundPerSample, alive);
  }
  return t;
}

BatchTail plan_batch_tail(const Plan& plan) {
  BatchTail bt;
  const size_t n = plan.ops.size();
  bt.start = n;
  if (const char* e = std::getenv("MEMLANE_BATCH_TAIL"); (e && *e == '0') || n == 0) return bt;
  size_t s = n;
  if (const char* e = std::getenv("MEMLANE_BATCH_TAIL_START"); e && *e) {
    s = std::min<size_t>(n, size_t(std::strtoull(e, nullptr, 10)));
  } else {
    const std::vector<uint64_t> live = live_bytes(plan);
    uint64_t peak = 0;
    while (s > 0 && worth_whole_batch(plan, plan.ops[s - 1]) &&
           std::max(peak, live[s - 1]) <= kBatchTailMaxBytesPerSample)
      peak = std::max(peak, live[--s]);
    // Weightless ops at the front (a GlobalAveragePool over a large map) stay in the chunks:
    // the tail would only hold their larger inputs for the whole batch.
    while (s < n && op_bytes(plan, plan.ops[s]).weights == 0) ++s;
    uint64_t weights = 0;
    for (size_t i = s; i < n; ++i) weights += op_bytes(plan, plan.ops[i]).weights;
    if (weights < kBatchTailMinWeightBytes) s = n;
  }
  if (s == n) return bt;
  bt.start = s;
  bt.tail = tail_plan(plan, s);
  bt.prefix = plan;
  bt.prefix.ops.resize(s);
  // What the tail reads from before it: a prefix op's output, or a graph input.
  std::set<int32_t> written_before;
  for (size_t i = 0; i < s; ++i)
    for (int32_t id : plan.ops[i].outputs)
      if (present(id)) written_before.insert(id);
  std::set<int32_t> read;
  for (size_t i = s; i < n; ++i)
    for (int32_t id : plan.ops[i].inputs)
      if (present(id) && !plan.tensors[size_t(id)].is_weight()) read.insert(id);
  for (int32_t id : read) {
    if (written_before.count(id)) bt.carried.push_back(id);
    else if (std::find(plan.inputs.begin(), plan.inputs.end(), id) != plan.inputs.end()) bt.inputs.push_back(id);
  }
  bt.prefix.outputs.clear();
  for (int32_t id : plan.outputs) {
    const bool from_tail = is_graph_output(bt.tail, id);  // written by a tail op
    bt.outputFromTail.push_back(from_tail);
    if (!from_tail) bt.prefix.outputs.push_back(id);
  }
  for (int32_t id : bt.carried)
    if (!is_graph_output(bt.prefix, id)) bt.prefix.outputs.push_back(id);
  bt.tail.inputs = bt.carried;
  bt.tail.inputs.insert(bt.tail.inputs.end(), bt.inputs.begin(), bt.inputs.end());
  return bt;
}

}  // namespace memlane::cpu
