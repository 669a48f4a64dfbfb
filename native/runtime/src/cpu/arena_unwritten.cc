#include "cpu/arena_unwritten.h"

#include <algorithm>
#include <utility>

namespace memlane::cpu {

uint64_t arena_unwritten_bytes_per_sample(const Plan& plan, const std::vector<std::unique_ptr<Kernel>>& kernels, size_t end, size_t first) {
  end = std::min(end, std::min(kernels.size() > first ? kernels.size() - first : 0, plan.ops.size()));
  auto has_kernel = [&](size_t i) { return kernels[first + i] != nullptr; };
  std::vector<std::pair<uint64_t, uint64_t>> written;  // [offset, offset + bytes) a sample
  auto add = [&](int32_t id) {
    if (id < 0 || size_t(id) >= plan.tensors.size()) return;
    const TensorInfo& t = plan.tensors[size_t(id)];
    // To the alignment: the planner's padding after a tensor lies in the pages it writes.
    const uint64_t a = plan.alignment ? plan.alignment : 1;
    if (!t.is_weight() && t.bytes > 0) written.emplace_back(t.offset, (t.offset + t.bytes + a - 1) / a * a);
  };
  for (int32_t id : plan.inputs) add(id);
  // A kernel and the ops folded into it (the null entries after it) write the last op's outputs.
  for (size_t i = 0; i < end;) {
    size_t last = i;
    if (has_kernel(i))
      while (last + 1 < end && !has_kernel(last + 1)) ++last;
    for (int32_t o : plan.ops[last].outputs) add(o);
    i = last + 1;
  }
  std::sort(written.begin(), written.end());
  uint64_t covered = 0, reach = 0;
  for (const auto& [a, b] : written) {
    if (b <= reach) continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  return plan.bytesPerSample > covered ? plan.bytesPerSample - covered : 0;
}

}  // namespace memlane::cpu
