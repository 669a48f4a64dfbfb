// Plans for the CUDA-vs-CPU comparison: one small plan per op (with the attribute
// variants that take different code paths) and a small residual CNN.
#pragma once

#include <string>
#include <vector>

#include "../../../tests/plan_builder.h"

namespace cudatest {

struct NamedPlan {
  std::string name;
  mltest::PlanBuilder plan;
  bool fp16 = true;  // also compared in the fp16 setting (false: values half cannot hold closely)
  // int64/int32 graph inputs get values in [intLo, intHi] (bool inputs 0/1); the default
  // keeps every fixture model's ids, masks and type ids in range.
  int64_t intLo = 0, intHi = 1;
};

std::vector<NamedPlan> op_plans();
// Plans both backends must refuse at prepare (shapes or attributes the kernels would compute
// differently from the CPU backend, or write past a tensor's end).
std::vector<NamedPlan> rejected_plans();
NamedPlan model_plan();
// test_plans_data.cc: the plan v2 ops (every dtype, the batch off axis 0) and their refusals.
std::vector<NamedPlan> data_op_plans();
std::vector<NamedPlan> data_rejected_plans();
// test_plans_positions.cc: CumSum and GatherElements (part of data_op_plans and data_rejected_plans).
std::vector<NamedPlan> position_plans();
std::vector<NamedPlan> position_rejected_plans();

}  // namespace cudatest
