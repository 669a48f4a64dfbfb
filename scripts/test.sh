#!/usr/bin/env bash
# The whole test suite: TypeScript type check, vitest (unit + integration, real ZeroMQ and
# real workers), the fault suite (test/fault: kills, Ctrl-C, attacks), pytest for the Python
# worker, ctest for memlane-rt, and the zoo suite (real architectures through `memlane
# compare`, test/zoo/).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
failed_steps=()
# One cache for the fixture models every step generates or reads (vitest's three configs and
# ctest's cuda_vs_cpu, which checks the compiled fixture plans), removed when the suite ends.
MEMLANE_TEST_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/memlane-test-cache-XXXXXX")
export MEMLANE_TEST_CACHE
# Nor do the user's calibrations (~/.cache/memlane) change what the tests run.
export MEMLANE_CACHE_DIR="${MEMLANE_CACHE_DIR:-$MEMLANE_TEST_CACHE/memlane-cache}"
trap 'rm -rf "$MEMLANE_TEST_CACHE"' EXIT
step() { printf '\n=== %s\n' "$*"; }
# CI shows only the tail of the log: the last lines say which steps failed.
failed() { fail=1; failed_steps+=("$1"); }
# Every step's output also goes to one log, so the summary can repeat the failing tests' names.
STEP_LOG="$MEMLANE_TEST_CACHE/steps.log"

step "typecheck (tsc --noEmit)"
npx tsc --noEmit -p tsconfig.json 2>&1 | tee -a "$STEP_LOG" || failed "typecheck"

step "vitest"
npx vitest run 2>&1 | tee -a "$STEP_LOG" || failed "vitest"

step "fault suite (seeded: MEMLANE_FAULT_SEED replays, MEMLANE_FAULT_SCALE multiplies the counts)"
npx vitest run --config vitest.fault.config.ts 2>&1 | tee -a "$STEP_LOG" || failed "fault suite"

step "pytest"
# pytest's tmp_path folders go inside the suite's cache (removed at exit), not into pytest-of-$USER
# in TMPDIR, which pytest keeps after the run.
.venv/bin/python -m pytest python/tests -q --basetemp "$MEMLANE_TEST_CACHE/pytest" 2>&1 | tee -a "$STEP_LOG" || failed "pytest"

if [ -f native/build/CTestTestfile.cmake ]; then
  step "ctest"
  ctest --test-dir native/build --output-on-failure 2>&1 | tee -a "$STEP_LOG" || failed "ctest"
fi

step "zoo (vitest --config test/zoo/vitest.config.ts)"
npx vitest run --config test/zoo/vitest.config.ts 2>&1 | tee -a "$STEP_LOG" || failed "zoo"

if [ "$fail" -ne 0 ]; then
  printf '\n=== FAILED steps: %s (their output is above)\n' "$(IFS=,; echo "${failed_steps[*]}")"
  # vitest's "FAIL file > test" and "×" lines, pytest's "FAILED", ctest's "(Failed)", tsc's "error TS".
  sed 's/\x1b\[[0-9;]*m//g' "$STEP_LOG" | grep -E '^ *(FAIL |×)|^FAILED |\((Failed|Timeout|SEGFAULT)\)|error TS[0-9]+' | sort -u | head -40
  # Then why, compactly (CI keeps only the tail): the fault suite's seeds, and for each vitest
  # failure its error's first line, the diff's lines and the "expected ..." line.
  printf '\n=== why\n'
  sed 's/\x1b\[[0-9;]*m//g' "$STEP_LOG" | grep -E '^\[fault\] .*: seed ' | sort -u | cut -c1-160
  sed 's/\x1b\[[0-9;]*m//g' "$STEP_LOG" | awk '
    /^ FAIL  / { if (seen[$0]++) { n = 0; next } print; n = 14; first = 1; next }
    n > 0 && first && NF { print "  " $0; first = 0; n--; next }
    n > 0 && (/^ *[-+] / || /expected .* to / || /(Error|Timeout|timed out)/) { print "  " $0; n-- }
    /^ *(❯|⎯)/ { n = 0 }
  ' | cut -c1-240 | head -40
else
  printf '\n=== every step passed\n'
fi
exit $fail
