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

rm -f build/meson-logs/rerun-* "$ASAN_DIR"/meson-logs/rerun-*  # lone reruns of an earlier test.sh
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

# A test that failed while two ran at once on this (possibly 2-core) machine is run once more,
# alone. It counts as passed only if that rerun passes, and it is then named as FLAKY in the last
# lines, so that the flakiness is seen and fixed rather than hidden; failing twice is a failure.
python3 - build "$ASAN_DIR" > build/first-failures.txt <<'PY'
import json, sys
for d in sys.argv[1:]:
    try:
        lines = open(f"{d}/meson-logs/testlog.json").read().splitlines()
    except FileNotFoundError:
        continue
    for line in lines:
        if line.strip():
            j = json.loads(line)
            if j.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP"):
                suite, _, name = j["name"].partition(" / ")
                print(f"{d}\t{suite}\t{name}")
PY
n=0
while IFS=$'\t' read -r dir suite name; do
  n=$((n + 1))
  echo "test.sh: rerunning alone: $dir/ $suite / $name"
  if [ "$dir" = "$ASAN_DIR" ]; then
    ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
      meson test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 3 \
        --logbase "rerun-$n" --suite "$suite" "$name" || true
  else
    meson test -C "$dir" --no-rebuild --print-errorlogs --logbase "rerun-$n" --suite "$suite" "$name" \
      || true
  fi
done < build/first-failures.txt

python3 - build "$ASAN_DIR" <<'PY'
import glob, json, sys
passed = failed = skipped = 0
failures = []  # (build dir, test name, result, output tail)
flaky = []     # (build dir, test name, first result)
def rerun_result(d, name):
    """The result of the lone rerun of test `name` in build dir d, or None."""
    for log in sorted(glob.glob(f"{d}/meson-logs/rerun-*.json")):
        for line in open(log):
            if line.strip():
                j = json.loads(line)
                if j.get("name") == name:
                    return j.get("result")
    return None
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
            j = json.loads(line)
            if rerun_result(d, j.get("name")) == "OK":
                passed += 1
                flaky.append((d, j.get("name", "?"), r))
                continue
            failed += 1
            out = (j.get("stdout") or "") + (j.get("stderr") or "")  # a sanitizer reports on stderr
            failures.append((d, j.get("name", "?"), r, out))
# CI keeps only the tail of this script's output: name every failure here, at the end, with the
# last lines its test printed, so a failure is never hidden above the part that was kept.
for d, name, r in flaky:
    print(f"test.sh: FLAKY in {d}/: {name}: {r} beside another test, passed when rerun alone "
          f"(first output: {d}/meson-logs/testlog.txt)")
for d, name, r, out in failures:
    print(f"test.sh: FAILED in {d}/: {name} ({r})")
    for l in out.rstrip().splitlines()[-40:]:
        print(f"    | {l}")
open("build/test-summary.txt", "w").write(f"{passed} {failed} {skipped}\n")
PY
read -r passed failed skipped < build/test-summary.txt
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
