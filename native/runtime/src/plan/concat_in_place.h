// Concat inputs in place (docs/plan-format.md, "Concat in place"): a version 4 plan may give a
// Concat input the bytes of its slice of the Concat's output, within one sample, so the op that
// writes the input writes the output and the Concat copies nothing. Such a plan
// (Plan::concatInPlace) runs one sample at a time: memlane-rt's CPU backend does; a backend
// that runs whole batches (CUDA) runs the plan with those inputs laid apart again.
// Header-only: the CUDA library uses it too, and links no memlane_core object.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>

#include "plan/plan.h"

namespace memlane {

// Whether input k of Concat `op` lies in place: the plan says Concat inputs may, the output is
// batch-first with one element on every axis between the batch and `axis` (the slice is one run
// of bytes a sample), input k is an activation, and it sits at the output's offset plus the
// bytes a sample of inputs 0..k-1.
inline bool concat_input_in_place(const Plan& plan, const Op& op, size_t k) {
  if (!plan.concatInPlace || op.type != OpType::kConcat || op.outputs.size() != 1 || k >= op.inputs.size()) return false;
  const TensorInfo& Y = plan.tensors[size_t(op.outputs[0])];
  if (Y.is_weight() || Y.shape.empty() || Y.shape[0] != -1) return false;
  const int axis = op.attrs.axis;
  if (axis < 1 || axis >= int(Y.shape.size())) return false;
  for (int i = 1; i < axis; ++i)
    if (Y.shape[size_t(i)] != 1) return false;
  uint64_t at = Y.offset;
  for (size_t j = 0; j < k; ++j) {
    if (op.inputs[j] < 0) return false;
    at += plan.tensors[size_t(op.inputs[j])].bytes;  // a weight input is [1, ...]: its bytes are a sample's
  }
  if (op.inputs[k] < 0) return false;
  const TensorInfo& X = plan.tensors[size_t(op.inputs[k])];
  return !X.is_weight() && X.offset == at && X.dtype == Y.dtype;
}

// Whether every input of Concat `op` lies in place: the Concat then copies nothing.
inline bool concat_copies_nothing(const Plan& plan, const Op& op) {
  if (op.type != OpType::kConcat || op.inputs.empty()) return false;
  for (size_t k = 0; k < op.inputs.size(); ++k)
    if (!concat_input_in_place(plan, op, k)) return false;
  return true;
}

// Whether Concat `op`'s output lies in place: its inputs begin another Concat's (the same
// tensors in order: DenseNet's layers concatenate their block's maps so far), and it sits at
// that Concat's output (all its inputs then lie in place too, and it copies nothing).
inline bool concat_output_in_place(const Plan& plan, const Op& op) {
  if (!concat_copies_nothing(plan, op)) return false;
  const uint64_t at = plan.tensors[size_t(op.outputs[0])].offset;
  for (const Op& b : plan.ops)
    if (&b != &op && b.type == OpType::kConcat && b.outputs.size() == 1 && b.outputs[0] != op.outputs[0] &&
        b.attrs.axis == op.attrs.axis && b.inputs.size() > op.inputs.size() &&
        plan.tensors[size_t(b.outputs[0])].offset == at && std::equal(op.inputs.begin(), op.inputs.end(), b.inputs.begin()))
      return true;
  return false;
}

// The plan with every in-place Concat input and output moved to a place of its own after the arena (which
// grows by their aligned bytes), concatInPlace false: the Concats then copy, and a batch may run
// at once with the plan's batch scaling. The weights still point into the same mapping.
inline Plan concat_inputs_apart(const Plan& plan) {
  Plan apart = plan;
  apart.concatInPlace = false;
  if (!plan.concatInPlace) return apart;
  // Which inputs lie in place is read off the original offsets (nested Concats included), then
  // each moves.
  std::set<int32_t> moved;
  for (const Op& op : plan.ops) {
    for (size_t k = 0; k < op.inputs.size(); ++k)
      if (concat_input_in_place(plan, op, k)) moved.insert(op.inputs[k]);
    if (concat_output_in_place(plan, op)) moved.insert(op.outputs[0]);
  }
  const auto align = [&](uint64_t v) { return (v + plan.alignment - 1) / plan.alignment * plan.alignment; };
  uint64_t end = align(plan.bytesPerSample);
  for (int32_t id : moved) {
    apart.tensors[size_t(id)].offset = end;
    end = align(end + plan.tensors[size_t(id)].bytes);
  }
  apart.bytesPerSample = end;
  return apart;
}

}  // namespace memlane
