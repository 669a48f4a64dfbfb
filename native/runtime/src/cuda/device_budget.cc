#include "device_budget.h"

#include <algorithm>

#include "exec_context.h"
#include "forward.h"
#include "forward_util.h"
#include "plan/concat_in_place.h"

namespace memlane::cuda {
namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

uint64_t weight_slot_bytes(const TensorInfo& t, Prec p) {
  return align_up(static_cast<uint64_t>(t.elements()) * static_cast<uint64_t>(elem_bytes(elem_of(t.dtype, p))), 256);
}

DeviceBudget device_budget(const Plan& plan, int64_t maxBatch, const CudaOptions& o) {
  // The backend runs such a plan with its Concat inputs laid apart (cuda_backend.cc prepare).
  if (plan.concatInPlace) return device_budget(concat_inputs_apart(plan), maxBatch, o);
  DeviceBudget b;
  const Prec prec = o.fp16 ? Prec::kF16 : Prec::kF32;
  b.halfArena = arena_halves(plan, prec);
  for (const TensorInfo& t : plan.tensors) {
    if (!t.is_weight()) continue;
    b.weightBytes += weight_slot_bytes(t, prec);
    if (prec == Prec::kF16 && t.dtype == DType::kFloat32)
      b.uploadStagingBytes = std::max<uint64_t>(b.uploadStagingBytes, static_cast<uint64_t>(t.elements()) * 4);
  }
  b.arenaBytes = align_up(static_cast<uint64_t>(maxBatch) * plan.bytesPerSample / (b.halfArena ? 2 : 1), 256);
  const int64_t perSample = max_col_elems_per_sample(plan);
  if (perSample > 0) b.colElems = perSample * std::max<int64_t>(1, std::min<int64_t>(maxBatch, kColBudgetElems / perSample));
  b.colBytes = static_cast<uint64_t>(b.colElems) * prec_bytes(prec);
  for (int32_t id : plan.inputs) b.inputStageBytes += staged(host_bytes(plan, id, maxBatch));
  for (int32_t id : plan.outputs) b.outputStageBytes += staged(host_bytes(plan, id, maxBatch));
  const int slots = context_slots(o);
  b.deviceInputSlots = (o.overlap || prec == Prec::kF16) ? slots : 0;
  b.deviceOutputSlots = prec == Prec::kF16 ? slots : 0;
  for (const Op& op : plan.ops)
    if (op.type == OpType::kGather || op.type == OpType::kGatherND || op.type == OpType::kGatherElements)
      b.errorWordBytes = sizeof(int);
  return b;
}

std::vector<std::pair<std::string, uint64_t>> DeviceBudget::context_allocations(const CudaOptions& o) const {
  std::vector<std::pair<std::string, uint64_t>> v{{"cublas-workspace", blasWorkspaceBytes}};
  if (o.arenaOnce) {
    v.emplace_back("arena", arenaBytes);
    v.emplace_back("im2col", colBytes);
  }
  if (errorWordBytes) v.emplace_back("index-error-word", errorWordBytes);
  for (int i = 0; i < deviceInputSlots; ++i) v.emplace_back("input-slot", inputStageBytes);
  for (int i = 0; i < deviceOutputSlots; ++i) v.emplace_back("output-slot", outputStageBytes);
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& a) { return a.second == 0; }), v.end());
  return v;
}

}  // namespace memlane::cuda
