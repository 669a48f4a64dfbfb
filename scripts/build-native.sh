#!/usr/bin/env bash
# Configures and builds native/ (memlane-rt, its tests, the CUDA backend when nvcc exists,
# the N-API addon when present) into native/build, Release. Called by scripts/bootstrap.sh.
# A run with nothing changed since the last successful build returns in a few milliseconds:
# the stamp native/build/.memlane-stamp is newer than every file and folder under native/
# (a changed, added or removed source touches its file or its folder).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=native/build
STAMP=$BUILD/.memlane-stamp
JOBS=${MEMLANE_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
log() { printf '[build-native] %s\n' "$*" >&2; }

up_to_date() {
  for s in "$STAMP" "$STAMP.partial"; do
    if [ -f "$s" ] && [ -z "$(find native -path "$BUILD" -prune -o -newer "$s" -print -quit)" ]; then
      return 0
    fi
  done
  return 1
}
up_to_date && exit 0

# One build at a time in native/build (bootstrap may run from several shells at once).
mkdir -p "$BUILD"
exec 9>"$BUILD/.lock"
flock 9
up_to_date && exit 0

configure() { cmake -S native -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null; }
build() { cmake --build "$BUILD" -j "$JOBS" "$@"; }

mkdir -p "$BUILD"
rm -f "$STAMP" "$STAMP.partial"
touch "$STAMP.next"  # sources edited during the build stay newer than the stamp
log "cmake configure + build ($BUILD, Release, -j$JOBS)"
if configure -UMEMLANE_WITH_CUDA && build >"$BUILD/.build.log" 2>&1; then
  :
elif [ -n "${CI:-}" ] || [ -n "${MEMLANE_STRICT_BUILD:-}" ]; then
  # In CI every native part, the CUDA backend included, must compile: no fallback that
  # would let a broken .cu file land unnoticed on machines without a GPU.
  log "native build failed (CI: no fallback); last lines:"
  tail -n 40 "$BUILD/.build.log" >&2 || true
  exit 1
else
  # memlane-rt must not be held hostage by an optional part (CUDA backend, addon) that does
  # not build on this machine: report it and build the runtime alone.
  log "full build failed (last lines below); retrying memlane-rt without CUDA"
  tail -n 20 "$BUILD/.build.log" >&2 || true
  configure -DMEMLANE_WITH_CUDA=OFF
  build --target memlane-rt
  mv "$STAMP.next" "$STAMP.partial"
  exit 0
fi
mv "$STAMP.next" "$STAMP"
