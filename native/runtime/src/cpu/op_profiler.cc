#include "cpu/op_profiler.h"

#include <algorithm>

namespace memlane::cpu {

void OpProfiler::fold_into_earlier() {
  for (size_t i = 0; i < calls_.size(); ++i) {
    if (!calls_[i]) continue;
    earlierMinUs_[i] = earlierCalls_[i] ? std::min(earlierMinUs_[i], minUs_[i]) : minUs_[i];
    earlierTotalUs_[i] += totalUs_[i];
    earlierCalls_[i] += calls_[i];
  }
  earlierRuns_ += runs_;
}

void OpProfiler::start(size_t ops) {
  if (earlierCalls_.size() == ops && calls_.size() == ops) {
    fold_into_earlier();
  } else {  // the first profile (or another plan): nothing earlier to keep
    earlierTotalUs_.assign(ops, 0.0);
    earlierMinUs_.assign(ops, 0.0);
    earlierCalls_.assign(ops, 0);
    earlierRuns_ = 0;
  }
  totalUs_.assign(ops, 0.0);
  minUs_.assign(ops, 0.0);
  calls_.assign(ops, 0);
  runs_ = 0;
  on_ = true;
}

OpProfile OpProfiler::result(const Plan& plan, const std::vector<const char*>& kernel_paths) const {
  OpProfile p;
  p.runs = runs_;
  for (size_t i = 0; i < totalUs_.size() && i < plan.ops.size(); ++i) {
    if (!kernel_paths[i]) {
      // Folded into the last op with a kernel: name it there.
      if (!p.ops.empty()) {
        std::string& f = p.ops.back().fused;
        f += (f.empty() ? "" : "+") + std::string(op_type_name(plan.ops[i].type));
      }
      continue;
    }
    OpTiming t;
    t.name = plan.ops[i].name;
    t.opType = op_type_name(plan.ops[i].type);
    t.kernel = kernel_paths[i];
    t.totalMs = totalUs_[i] / 1000.0;
    t.minMs = minUs_[i] / 1000.0;
    t.calls = calls_[i];
    p.ops.push_back(std::move(t));
  }
  return p;
}

void OpProfiler::print(const Plan& plan, const std::vector<const char*>& kernel_paths, std::FILE* f) const {
  OpProfiler all(*this);
  if (all.earlierCalls_.size() == all.calls_.size()) all.fold_into_earlier();
  all.totalUs_ = all.earlierTotalUs_;
  all.minUs_ = all.earlierMinUs_;
  all.calls_ = all.earlierCalls_;
  all.runs_ = all.earlierRuns_;
  if (!all.runs_) return;
  const OpProfile p = all.result(plan, kernel_paths);
  size_t i = 0;
  for (const OpTiming& t : p.ops)
    std::fprintf(f, "[memlane profile] %3zu %-18s %-40s mean %10.2f us  min %10.2f us  calls %llu%s%s%s%s%s\n", i++,
                 t.opType.c_str(), t.name.c_str(), t.totalMs * 1000.0 / double(p.runs), t.minMs * 1000.0,
                 static_cast<unsigned long long>(t.calls),
                 t.fused.empty() ? "" : "  + ", t.fused.c_str(), t.kernel.empty() ? "" : "  [", t.kernel.c_str(),
                 t.kernel.empty() ? "" : "]");
}

}  // namespace memlane::cpu
