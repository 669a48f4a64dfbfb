// The kernels' packed weights start on a 64-byte cache line (cpu/aligned_floats.h): their
// 16-float vector loads then never straddle two lines. std::vector's data was 16-byte aligned,
// and that cost 2-4 % of resnet18's pixel-rows convs on an Intel Xeon (docs/native-cpu.md).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/aligned_floats.h"
#include "cpu/conv_grouped_blocked.h"
#include "cpu/lstm_packed.h"
#include "cpu/simd/gemm_panels.h"
#include "cpu/simd/pw_lanes.h"
#include "harness.h"

using mltest::finish;

static bool on_a_line(const float* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// The other packs, by type (the depthwise kernel's class is private to its .cc).
using memlane::cpu::AlignedFloats;
static_assert(std::is_same_v<decltype(memlane::cpu::GroupedBlockedConv::wpack), AlignedFloats>);
static_assert(std::is_same_v<decltype(memlane::cpu::LstmPacked::w), AlignedFloats>);
static_assert(std::is_same_v<decltype(memlane::cpu::LstmPacked::r), AlignedFloats>);

int main() {
  // Odd sizes, and many of them, so malloc's 16-byte granules would show.
  for (int64_t n : {1, 3, 17, 1000, 4099, 70000}) {
    std::vector<AlignedFloats> vs;
    for (int k = 0; k < 8; ++k) vs.emplace_back(size_t(n + k), 1.f);
    for (const auto& v : vs) CHECK_MSG(on_a_line(v.data()), "AlignedFloats of " + std::to_string(v.size()) + " floats");
  }
  const std::vector<float> w(size_t(37 * 45), 0.5f);
  for (int k = 0; k < 4; ++k) {
    const auto panels = memlane::cpu::simd::pack_panels(w.data(), 37, 45, k % 2 == 1);
    CHECK_MSG(on_a_line(panels.w.data()), "pack_panels' panels");
    const auto lanes = memlane::cpu::simd::pw_lanes_pack(w.data(), nullptr, 45, 37);
    CHECK_MSG(on_a_line(lanes.w.data()) && on_a_line(lanes.b.data()), "pw_lanes_pack's weights and bias");
  }
  return finish("aligned_weights_test");
}
