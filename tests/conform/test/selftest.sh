#!/bin/sh
# Self-test of strand-conform's own machinery against the dummy plugin (test/dummy_plugin.c):
# selection, crash and hang isolation, report formats, --list vs CHECKS.md, multi-host mode on
# localhost, a rank that never joins, per-check output capture, and run.sh's verdict table.
# usage: selftest.sh STRAND_CONFORM DUMMY_PLUGIN
set -u
CONFORM=$1
DUMMY=$2
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/conform-selftest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# 1. a healthy run: exit 0, exact last line
"$CONFORM" --no-progress --only 'load.*,props.*' "$DUMMY" >"$WORK/1.out" 2>&1
rc=$?
last=$(tail -n 1 "$WORK/1.out")
[ $rc = 0 ] && echo "$last" | grep -Eq '^[0-9]+ passed, 0 failed, [0-9]+ skipped$' \
  && ok "healthy run ($last)" || { cat "$WORK/1.out"; fail "healthy run rc=$rc last='$last'"; }

# 2. a crashing plugin fails the check that crashed, the run goes on (under AddressSanitizer its
#    own SIGSEGV handler would turn the crash into an abort first: leave the signal to the suite)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:handle_segv=0" CONFORM_DUMMY_MODE=crash-props "$CONFORM" --no-progress --only 'props.speed-positive,load.symbols' \
  "$DUMMY" >"$WORK/2.out" 2>&1
rc=$?
grep -q 'FAIL .*props.speed-positive' "$WORK/2.out" && grep -q 'crashed with SIGSEGV' "$WORK/2.out" \
  && grep -q 'PASS .*load.symbols' "$WORK/2.out" && [ $rc = 1 ] \
  && ok "crash isolated" || { cat "$WORK/2.out"; fail "crash isolation rc=$rc"; }

# 3. a hanging plugin times out, bounded
t0=$(date +%s)
CONFORM_DUMMY_MODE=hang-props "$CONFORM" --no-progress --only props.name --timeout-scale 0.05 \
  "$DUMMY" >"$WORK/3.out" 2>&1
rc=$?
t1=$(date +%s)
grep -q 'timed out after' "$WORK/3.out" && [ $rc = 1 ] && [ $((t1 - t0)) -lt 30 ] \
  && ok "hang bounded ($((t1 - t0)) s)" || { cat "$WORK/3.out"; fail "hang rc=$rc"; }

# 4. exit() inside the plugin
CONFORM_DUMMY_MODE=exit-init "$CONFORM" --no-progress --only load.init "$DUMMY" >"$WORK/4.out" 2>&1
grep -q 'exited (status 3) without a result' "$WORK/4.out" && ok "exit() reported" \
  || { cat "$WORK/4.out"; fail "exit() in plugin"; }

# 5. TAP, JSON, JUnit
"$CONFORM" --no-progress --tap --json "$WORK/r.json" --junit "$WORK/r.xml" --only 'props.*' \
  "$DUMMY" >"$WORK/5.out" 2>&1
head -n 1 "$WORK/5.out" | grep -q '^TAP version 13$' && grep -q '^1\.\.13$' "$WORK/5.out" \
  && tail -n 1 "$WORK/5.out" | grep -Eq '^# [0-9]+ passed, 0 failed, [0-9]+ skipped$' \
  && ok "TAP" || { cat "$WORK/5.out"; fail "TAP"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['passed']+d['skipped']==13 and d['failed']==0" \
  "$WORK/r.json" && ok "JSON" || fail "JSON"
python3 -c "import xml.etree.ElementTree as E,sys; r=E.parse(sys.argv[1]).getroot(); assert int(r.get('tests'))==13" \
  "$WORK/r.xml" && ok "JUnit" || fail "JUnit"

# 6. every listed id is documented in CHECKS.md and the other way round
"$CONFORM" list | awk 'NF>1 && $1 ~ /\./ {print $1}' | sort >"$WORK/ids"
grep -o '^| `[a-z0-9.-]*`' "$HERE/CHECKS.md" | tr -d '|` ' | sort >"$WORK/doc"
if diff "$WORK/ids" "$WORK/doc" >/dev/null; then ok "--list matches CHECKS.md ($(wc -l <"$WORK/ids") ids)"
else diff "$WORK/ids" "$WORK/doc"; fail "--list vs CHECKS.md"; fi

# 7. a plugin that does not load: non-zero exit even when load.* is not selected
"$CONFORM" --no-progress --only props.name /nonexistent/libnccl-net-x.so >"$WORK/7.out" 2>&1
[ $? != 0 ] && grep -q 'did not load' "$WORK/7.out" && ok "unloadable plugin" \
  || { cat "$WORK/7.out"; fail "unloadable plugin"; }

# 8. multi-host mode on one host
PORT=$(( 30000 + $$ % 20000 ))
"$CONFORM" --no-progress --coordinator 127.0.0.1:$PORT --rank 1 --nranks 2 --only 'props.*' "$DUMMY" \
  >"$WORK/8b.out" 2>&1 &
B=$!
"$CONFORM" --no-progress --coordinator 127.0.0.1:$PORT --rank 0 --nranks 2 --only 'props.*' "$DUMMY" \
  >"$WORK/8a.out" 2>&1
rca=$?
wait $B
rcb=$?
[ $rca = 0 ] && [ $rcb = 0 ] && tail -n 1 "$WORK/8b.out" | grep -q 'passed, 0 failed' \
  && ok "multi-host mode" || { cat "$WORK/8a.out" "$WORK/8b.out"; fail "multi-host rc=$rca/$rcb"; }

# 9. a rank that never joins: bounded failure with a clear message
t0=$(date +%s)
"$CONFORM" --no-progress --coordinator 127.0.0.1:$((PORT + 1)) --rank 0 --nranks 2 \
  --bootstrap-timeout 2 --only props.name "$DUMMY" >"$WORK/9.out" 2>&1
rc=$?
t1=$(date +%s)
[ $rc != 0 ] && grep -q 'rank 1 did not join' "$WORK/9.out" && [ $((t1 - t0)) -lt 20 ] \
  && ok "missing rank" || { cat "$WORK/9.out"; fail "missing rank rc=$rc"; }

# 10. a rank process that dies mid-run: the others stop fast
"$CONFORM" --no-progress --coordinator 127.0.0.1:$((PORT + 2)) --rank 1 --nranks 2 \
  --only 'props.*' "$DUMMY" >"$WORK/10b.out" 2>&1 &
B=$!
sleep 0.3
kill -9 $B 2>/dev/null
t0=$(date +%s)
"$CONFORM" --no-progress --coordinator 127.0.0.1:$((PORT + 2)) --rank 0 --nranks 2 \
  --bootstrap-timeout 3 --only 'props.*' "$DUMMY" >"$WORK/10a.out" 2>&1
rc=$?
t1=$(date +%s)
wait $B 2>/dev/null
[ $rc != 0 ] && [ $((t1 - t0)) -lt 20 ] && ok "dead rank ends the run" \
  || { cat "$WORK/10a.out"; fail "dead rank rc=$rc"; }

# 11. what a plugin logs or prints during a check belongs to that check: nothing on the terminal
#     by default, under the row with -v, always in the JSON; the last lines under a crash
CONFORM_DUMMY_MODE=warn-props "$CONFORM" --no-progress --only props.name --json "$WORK/11.json" \
  "$DUMMY" >"$WORK/11.out" 2>"$WORK/11.err"
rc=$?
[ $rc = 0 ] && ! grep -q 'dummy-' "$WORK/11.out" "$WORK/11.err" \
  && ok "plugin output captured, not shown by default" \
  || { cat "$WORK/11.out" "$WORK/11.err"; fail "plugin output leaked rc=$rc"; }
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
log = [c for c in d['checks'] if c['id'] == 'props.name'][0]['log']
for want in ('[rank 0] [plugin WARN dummy_plugin.c:', 'dummy-warn-line', '[rank 1] dummy-stderr-line',
             '[rank 0] dummy-stdout-line'):
    assert any(want in l for l in log), (want, log)
" "$WORK/11.json" && ok "plugin output in the JSON" || fail "plugin output in the JSON"
CONFORM_DUMMY_MODE=warn-props "$CONFORM" --no-progress -v --only props.name "$DUMMY" \
  >"$WORK/11v.out" 2>&1
grep -A3 'PASS .*props.name' "$WORK/11v.out" | grep -q '> \[rank 0\] \[plugin WARN .*dummy-warn-line' \
  && ok "-v shows the output under the row" || { cat "$WORK/11v.out"; fail "-v output"; }
ASAN_OPTIONS="${ASAN_OPTIONS:-}:handle_segv=0" CONFORM_DUMMY_MODE=crash-props "$CONFORM" --no-progress \
  --only props.name "$DUMMY" >"$WORK/11c.out" 2>&1
grep -A4 'FAIL .*props.name' "$WORK/11c.out" | grep -q 'dummy-last-words before the crash' \
  && ok "a crash shows its last output" || { cat "$WORK/11c.out"; fail "crash output"; }

# 12. run.sh's verdict table across plugins, from two --json results (one failing)
"$CONFORM" --no-progress --only 'props.*' --json "$WORK/12-good.json" "$DUMMY" >/dev/null 2>&1
CONFORM_DUMMY_MODE=bad-max-comms FI_PROVIDER=prov-x "$CONFORM" --no-progress --only 'props.*' \
  --json "$WORK/12-bad.json" "$DUMMY" >/dev/null 2>&1
RUNSH=$(cd "$HERE/../.." && pwd)/run.sh
"$RUNSH" --summary "$WORK/12-good.json" "$WORK/12-bad.json" >"$WORK/12.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q '^=== verdict across plugins ===$' "$WORK/12.out" \
  && grep -Eq '^plugin +provider/device +ABI +passed +failed +skipped +verdict$' "$WORK/12.out" \
  && grep -Eq '^conformdummy +default +v12 +12 +0 +1 +PASS$' "$WORK/12.out" \
  && grep -Eq '^conformdummy +prov-x +v12 +11 +1 +1 +FAIL$' "$WORK/12.out" \
  && tail -n 1 "$WORK/12.out" | grep -Eq '^total +2 rows +23 +1 +2 +FAIL +1 of 2 rows failed$' \
  && ok "verdict table (failing run)" || { cat "$WORK/12.out"; fail "verdict table rc=$rc"; }
"$RUNSH" --summary "$WORK/12-good.json" "$WORK/12-missing.json" >"$WORK/12m.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -Eq '^12-missing +- +- +0 +0 +0 +FAIL +no result' "$WORK/12m.out" \
  && ok "verdict table (missing result)" || { cat "$WORK/12m.out"; fail "missing result rc=$rc"; }
"$RUNSH" --summary "$WORK/12-good.json" >"$WORK/12g.out" 2>&1
rc=$?
[ $rc = 0 ] && tail -n 1 "$WORK/12g.out" | grep -Eq '^total +1 row +12 +0 +1 +PASS$' \
  && ok "verdict table (passing run)" || { cat "$WORK/12g.out"; fail "passing verdict rc=$rc"; }

# 13. --all-abis: an ABI-independent check (load.symbols) runs once, at the newest version (v12);
#     its v9 row is a skip that says so. A per-ABI check (load.table-complete) runs at both.
"$CONFORM" --no-progress --all-abis --json "$WORK/13.json" --only 'load.symbols,load.table-complete' \
  "$DUMMY" >"$WORK/13.out" 2>&1
python3 - "$WORK/13.json" <<'PYEOF' && ok "--all-abis runs ABI-independent checks once" || { cat "$WORK/13.out"; fail "--all-abis ABI-independent"; }
import json, sys
rows = {(r["id"], r["abi"]): r for r in json.load(open(sys.argv[1]))["checks"]}
assert rows[("load.symbols", 12)]["status"] == "PASS", rows
s9 = rows[("load.symbols", 9)]
assert s9["status"] == "SKIP" and "ABI-independent: run once, at v12" in s9["message"], s9
assert rows[("load.table-complete", 9)]["status"] != "SKIP", rows
assert rows[("load.table-complete", 12)]["status"] != "SKIP", rows
PYEOF

echo "$FAILS selftest failure(s)"
[ $FAILS = 0 ]
