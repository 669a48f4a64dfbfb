// Asserts which depthwise kernel the CPU backend builds (ops_test and fusion_test, which ctest
// runs with MEMLANE_DW_BLOCKED / MEMLANE_DW_PER_CHANNEL set).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/simd/avx2_gemm.h"
#include "harness.h"
#include "op_runner.h"

namespace mltest {

// A 3x3 stride-2 conv over 112x112 planes (past L1) reads them directly on AVX-512
// (conv_depthwise_s2_avx512.h) unless MEMLANE_DW_S2_PHASES or MEMLANE_DW_BLOCKED asks otherwise.
inline void check_s2_direct_path() {
  PlanBuilder pb;
  const int64_t C = 3;
  int x = pb.input("x", {C, 112, 112});
  int w = pb.weight("w", {C, 1, 3, 3}, std::vector<float>(size_t(C * 9), 0.5f));
  int y = pb.output("y", {C, 56, 56});
  pb.op("Conv", {x, w, -1}, {y},
        {{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
         {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", C}});
  const std::string path = conv_kernel_path(pb, 0);
  std::string want = "depthwise_s2_direct";
  if (std::getenv("MEMLANE_CONV_NO_DEPTHWISE")) return;  // the grouped path: checked below
  if (!memlane::cpu::use_avx512f() || std::getenv("MEMLANE_DW_S2_PHASES")) want = "depthwise_per_channel";
  else if (std::getenv("MEMLANE_DW_BLOCKED")) want = "depthwise_blocked";
  std::printf("depthwise path: 3x3 stride 2 over 112x112 runs %s\n", path.c_str());
  CHECK_MSG(path == want, path + " (expected " + want + ")");
}

// Which depthwise kernel a conv gets: by the measured rule (blocked on 5x5 and on maps under 24
// columns, per-channel on 3x3 with 24+), or the one MEMLANE_DW_BLOCKED / MEMLANE_DW_PER_CHANNEL
// asks for: the *_dw_blocked / *_dw_per_channel ctest runs must really run that kernel.
inline void check_depthwise_path() {
  auto dw_plan = [](int64_t k, int64_t W, int64_t s = 1) {
    PlanBuilder pb;
    const int64_t C = 20, H = 9, OH = (H - 1) / s + 1, OW = (W - 1) / s + 1;
    int x = pb.input("x", {C, H, W});
    int w = pb.weight("w", {C, 1, k, k}, std::vector<float>(size_t(C * k * k), 0.5f));
    int y = pb.output("y", {C, OH, OW});
    pb.op("Conv", {x, w, -1}, {y},
          {{"kernel", std::vector<int64_t>{k, k}}, {"strides", std::vector<int64_t>{s, s}},
           {"pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2}}, {"group", C}});
    return pb;
  };
  const std::string small = conv_kernel_path(dw_plan(5, 7), 0), wide = conv_kernel_path(dw_plan(3, 56), 0);
  const std::string small_s2 = conv_kernel_path(dw_plan(3, 14, 2), 0);
  check_s2_direct_path();
  const std::string blocked = "depthwise_blocked", per_channel = "depthwise_per_channel";
  if (std::getenv("MEMLANE_CONV_NO_DEPTHWISE")) {
    std::printf("depthwise path: MEMLANE_CONV_NO_DEPTHWISE set, the grouped conv path runs\n");
    const auto grouped_path = [](const std::string& p) { return p.rfind("depthwise", 0) != 0 && p.rfind("no kernel", 0) != 0; };
    CHECK_MSG(grouped_path(small) && grouped_path(wide), small + " / " + wide);
  } else if (std::getenv("MEMLANE_DW_PER_CHANNEL") || !memlane::cpu::use_avx512f()) {
    // Without AVX-512, strided convs to small maps take the grouped kernel's AVX2 lanes (8
    // channels a vector: grouped_blocked_takes_depthwise), unless a switch keeps them on the
    // per-channel kernel; stride 1 stays there at any size.
    const bool avx2_lanes = !memlane::cpu::use_avx512f() && memlane::cpu::simd::have_avx2_gemm() &&
                            !std::getenv("MEMLANE_DW_PER_CHANNEL") && !std::getenv("MEMLANE_DW_NO_AVX2") &&
                            !std::getenv("MEMLANE_CONV_GROUPED_NO_AVX2") && !std::getenv("MEMLANE_CONV_NO_GROUPED");
    if (!memlane::cpu::use_avx512f())
      std::printf("depthwise path: blocked kernel skipped (no AVX-512F, or MEMLANE_CPU_NO_AVX512 set)%s\n",
                  avx2_lanes ? "; a 3x3 stride 2 to 5x7 takes the AVX2 grouped kernel" : "");
    const std::string want_s2 = avx2_lanes ? "grouped_blocked_avx2" : per_channel;
    CHECK_MSG(small == per_channel && wide == per_channel && small_s2 == want_s2,
              small + " / " + wide + " / " + small_s2 + " (expected " + per_channel + " / " + per_channel + " / " + want_s2 + ")");
  } else if (std::getenv("MEMLANE_DW_BLOCKED")) {
    CHECK_MSG(small == blocked && wide == blocked, small + " / " + wide);
  } else {
    CHECK_MSG(small == blocked && wide == per_channel, small + " / " + wide);
  }
}

}  // namespace mltest
