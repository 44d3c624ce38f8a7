#!/usr/bin/env bash
# Strand's test command: installs and builds (through run.sh), runs every meson test suite, then
# builds the tests again with AddressSanitizer + UndefinedBehaviorSanitizer and runs them there.
# The last line is "N passed, N failed, N skipped" over both builds; exit status is non-zero on
# any failure.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

./run.sh --build-only

ASAN_DIR=build-asan
run_suites() { # build-dir [meson test options]
  local dir=$1; shift
  # meson exits non-zero on a failing test; the summary below is what decides.
  meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" || true
}

echo "test.sh: running all suites (plain build)"
run_suites build

echo "test.sh: building with -Db_sanitize=address,undefined in $ASAN_DIR/"
if [ -f "$ASAN_DIR/build.ninja" ]; then
  meson setup --reconfigure "$ASAN_DIR" >/dev/null
else
  meson setup "$ASAN_DIR" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$ASAN_DIR" >/dev/null
# Every suite runs under the sanitizers too; none needs to be skipped there.
# LeakSanitizer is on: a plugin that leaks across init/finalize fails here.
ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  run_suites "$ASAN_DIR" --timeout-multiplier 3

python3 - build "$ASAN_DIR" <<'PY'
import json, sys
passed = failed = skipped = 0
failures = []  # (build dir, test name, result, output tail)
for d in sys.argv[1:]:
    try:
        lines = open(f"{d}/meson-logs/testlog.json").read().splitlines()
    except FileNotFoundError:
        print(f"test.sh: no test log in {d}/", file=sys.stderr); failed += 1; continue
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
            j = json.loads(line)
            failures.append((d, j.get("name", "?"), r, j.get("stdout") or ""))
# CI keeps only the tail of this script's output: name every failure here, at the end, with the
# last lines its test printed, so a failure is never hidden above the part that was kept.
for d, name, r, out in failures:
    print(f"test.sh: FAILED in {d}/: {name} ({r})")
    for l in out.rstrip().splitlines()[-25:]:
        print(f"    | {l}")
open("build/test-summary.txt", "w").write(f"{passed} {failed} {skipped}\n")
PY
read -r passed failed skipped < build/test-summary.txt
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
