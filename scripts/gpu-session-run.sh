#!/usr/bin/env bash
# What a session lent a GPU runs there, in one call (docs/gpu.md, "A GPU session"): from the
# repository root, with .gpucarry/ made by scripts/gpu-session-prepare.sh carried along:
#   bash .gpucarry/gpu-session-run.sh            (device tool: carry [".gpucarry"], timeout ~420 s)
# Writes to $OUT (the device tool brings it back):
#   env.log          GPU, driver, where cuBLAS and NVML were found
#   cuda_vs_cpu.log  ctest cuda_vs_cpu over the built-in plans and every carried plan
#   device.log       per plan and setting: the budget (--budget) and the device memory by stage
#                    and after each batch; then node --import tsx scripts/gpu-session-report.ts
#                    DIR prints estimate vs measured here
#   memcheck.log     compute-sanitizer memcheck over two carried CNNs, when it is installed
# Each step has its own time limit, so one that hangs leaves the others their time.
set -u
C=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/gpu-session-out}
mkdir -p "$O" "$C/bin"
T0=$(date +%s)
el() { echo "[t+$(($(date +%s) - T0))s] $*"; }
tar -xJf "$C/bin.tar.xz" -C "$C/bin"
CUB=$(ls /usr/local/cuda*/lib64/libcublas.so.1[0-9] /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.1[0-9] 2>/dev/null | head -1)
NVML=$(ls /usr/local/nvidia/lib64/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 2>/dev/null | head -1)
export MEMLANE_CUBLAS=$CUB
export LD_LIBRARY_PATH=$C/lib${CUB:+:$(dirname "$CUB")}${NVML:+:$(dirname "$NVML")}:${LD_LIBRARY_PATH:-}
P=$C/plans
{
  el env
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  echo "cublas: ${CUB:-not found}; nvml: ${NVML:-not found}"
  ldd "$C/bin/memlane_cuda_test" | grep -E "not found|cudart"
} >"$O/env.log" 2>&1

{
  el cuda_vs_cpu
  MEMLANE_TEST_PLANS=$P/fixtures:$P/int:$P/zoo timeout 240 "$C/bin/memlane_cuda_test"
  echo "rc $?"
} >"$O/cuda_vs_cpu.log" 2>&1

# Device memory: the calibration's probe first (the estimate's tiny plan, 1 and 2 contexts, no
# request), then each plan in four settings at batches 1, 8, 64.
{
  for c in 1 2; do
    echo "=== probe contexts=$c"
    timeout 30 "$C/bin/memlane_cuda_bench" "$P/probe/tiny.mlplan" --budget --batches 1 "contexts=$c"
    timeout 30 "$C/bin/memlane_cuda_bench" "$P/probe/tiny.mlplan" --batches 1 --iters 0 --warmup 0 "contexts=$c"
  done
  for plan in "$P"/fixtures/resnet-mini.mlplan "$P"/fixtures/mlp.mlplan "$P"/zoo/*.mlplan; do
    [ -f "$plan" ] || continue
    for sw in "" "fp16=true" "contexts=2" "arena=per-request overlap=false"; do
      echo "=== plan $plan | ${sw:-default}"
      # shellcheck disable=SC2086
      timeout 30 "$C/bin/memlane_cuda_bench" "$plan" --budget --batches 64 $sw
      # shellcheck disable=SC2086
      timeout 30 "$C/bin/memlane_cuda_bench" "$plan" --batches 1,8,64 --iters 10 --warmup 2 $sw
      echo "rc $?"
    done
  done
} >"$O/device.log" 2>&1

if command -v compute-sanitizer >/dev/null; then
  {
    for plan in $(ls "$P"/zoo/*.mlplan 2>/dev/null | head -2); do
      el "memcheck $plan"
      timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$C/bin/memlane_cuda_bench" "$plan" --batches 1,3 --iters 2 --warmup 1
      echo "rc $?"
    done
  } >"$O/memcheck.log" 2>&1
fi
el "done" >>"$O/env.log"
tail -2 "$O/cuda_vs_cpu.log"
grep -c '"stage":"prepared"' "$O/device.log"
