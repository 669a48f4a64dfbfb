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
};

std::vector<NamedPlan> op_plans();
NamedPlan model_plan();

}  // namespace cudatest
