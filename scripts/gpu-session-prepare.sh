#!/usr/bin/env bash
# Prepares what a session lent a GPU carries to it (docs/gpu.md, "A GPU session"): the CUDA
# test and bench built here for Hopper (sm_90, stripped, xz), the cudart they link, the run
# script, and compiled plans: the fixture models, the int64 fixtures, and every bench:zoo
# export cached here (legacy exporter; sequence dims fixed at 16). All in .gpucarry/ (git
# ignores it), under the 64 MiB the device tool carries; plans that would pass it are left
# out and named. Run from the repository root after `npm run bootstrap`:
#   bash scripts/gpu-session-prepare.sh [ZOO_EXPORTS_DIR]
# then, on the device tool: run `bash scripts/gpu-session-run.sh` with carry [".gpucarry"].
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpucarry
BUILD=.gpucarry-build
export GPU_CARRY_MIB=${GPU_CARRY_MIB:-48}  # plans; with the binaries (~4 MiB) and the tracked tree (~5) under the tool's 64
log() { printf '[gpu-session-prepare] %s\n' "$*" >&2; }
grep -qx '/.gpucarry/' .git/info/exclude 2>/dev/null || echo '/.gpucarry/' >> .git/info/exclude
grep -qx '/.gpucarry-build/' .git/info/exclude 2>/dev/null || echo '/.gpucarry-build/' >> .git/info/exclude
rm -rf "$OUT" && mkdir -p "$OUT/lib" "$OUT/plans/fixtures" "$OUT/plans/int" "$OUT/plans/zoo"

log "building memlane_cuda_test and memlane_cuda_bench for sm_90 in $BUILD"
cmake -S native -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMEMLANE_CUDA_ARCHS=90-real -DMEMLANE_WITH_ADDON=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target memlane_cuda_test memlane_cuda_bench >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$BUILD/runtime/src/cuda/memlane_cuda_test" "$BUILD/runtime/src/cuda/memlane_cuda_bench" "$tmp/"
strip "$tmp"/memlane_cuda_*
tar -C "$tmp" -cJf "$OUT/bin.tar.xz" memlane_cuda_test memlane_cuda_bench
cudart=$(ldd "$tmp/memlane_cuda_test" | awk '/libcudart/ {print $3}')
cp -L "$cudart" "$OUT/lib/"
cp scripts/gpu-session-run.sh "$OUT/"

log "compiling plans"
.venv/bin/python test/fixtures/onnx/make_int_models.py "$tmp/int" >/dev/null 2>&1
node --import tsx test/fixtures/onnx/make_plans.ts "$OUT/plans/fixtures" >/dev/null
rm -f "$OUT"/plans/fixtures/*.bin "$OUT"/plans/fixtures/plans.json  # the plans alone travel
node --import tsx scripts/gpu-session-plans.ts "$OUT/plans" "$tmp/int" "${1:-}"
du -sh --apparent-size "$OUT" >&2
log "done: carry [\"$OUT\"], command: bash $OUT/gpu-session-run.sh"
