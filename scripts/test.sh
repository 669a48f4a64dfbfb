#!/usr/bin/env bash
# The whole test suite: TypeScript type check, vitest (unit + integration, real ZeroMQ and
# real workers), the fault suite (test/fault: kills, Ctrl-C, attacks), pytest for the Python
# worker, ctest for memlane-rt, and the zoo suite (real architectures through `memlane
# compare`, test/zoo/).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
# One cache for the fixture models every step generates or reads (vitest's three configs and
# ctest's cuda_vs_cpu, which checks the compiled fixture plans), removed when the suite ends.
MEMLANE_TEST_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/memlane-test-cache-XXXXXX")
export MEMLANE_TEST_CACHE
# Nor do the user's calibrations (~/.cache/memlane) change what the tests run.
export MEMLANE_CACHE_DIR="${MEMLANE_CACHE_DIR:-$MEMLANE_TEST_CACHE/memlane-cache}"
trap 'rm -rf "$MEMLANE_TEST_CACHE"' EXIT
step() { printf '\n=== %s\n' "$*"; }

step "typecheck (tsc --noEmit)"
npx tsc --noEmit -p tsconfig.json || fail=1

step "vitest"
npx vitest run || fail=1

step "fault suite (seeded: MEMLANE_FAULT_SEED replays, MEMLANE_FAULT_SCALE multiplies the counts)"
npx vitest run --config vitest.fault.config.ts || fail=1

step "pytest"
.venv/bin/python -m pytest python/tests -q || fail=1

if [ -f native/build/CTestTestfile.cmake ]; then
  step "ctest"
  ctest --test-dir native/build --output-on-failure || fail=1
fi

step "zoo (vitest --config test/zoo/vitest.config.ts)"
npx vitest run --config test/zoo/vitest.config.ts || fail=1

exit $fail
