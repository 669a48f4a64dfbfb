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
};

std::vector<NamedPlan> op_plans();
// Plans both backends must refuse at prepare (shapes or attributes the kernels would compute
// differently from the CPU backend, or write past a tensor's end).
std::vector<NamedPlan> rejected_plans();
NamedPlan model_plan();

}  // namespace cudatest
