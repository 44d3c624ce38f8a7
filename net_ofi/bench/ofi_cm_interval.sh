#!/bin/sh
# What strand-ofi's default FI_OFI_RXM_CM_PROGRESS_INTERVAL=100 (issue 23: connections queued
# behind strangers) costs the data path, against libfabric's own 10000: strand-conform perf on
# tcp;ofi_rxm, the two values interleaved round by round, best figure per size and value.
#
#   net_ofi/bench/ofi_cm_interval.sh STRAND_CONFORM PLUGIN_SO [OUTDIR]
#
# Build with the default buildtype: -Dbuildtype=release (-O3) trips a -Werror stringop-overflow
# false positive in tests/conform/report.c with gcc 12.
# STRAND_BENCH_REPEAT rounds (default 3); STRAND_BENCH_DOMAIN the domain (default lo); sizes 8 B to
# STRAND_BENCH_MAX (default 1M). Prints one markdown table (also OUTDIR/table.md): half-round-trip
# p50 latency and streaming bandwidth (depth 8) for each value, and their ratio. A user-set
# FI_OFI_RXM_CM_PROGRESS_INTERVAL overrides strand-ofi's default, so any strand-ofi build can be
# compared this way. A benchmark, not a test: nothing is asserted; every run is bounded by timeout.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 STRAND_CONFORM PLUGIN_SO [OUTDIR]" >&2
  exit 2
fi
CONFORM=$1
PLUGIN=$2
OUT=${3:-$(mktemp -d "${TMPDIR:-/tmp}/ofi-cm-interval.XXXXXX")}
mkdir -p "$OUT"
REPEAT=${STRAND_BENCH_REPEAT:-3}
DOMAIN=${STRAND_BENCH_DOMAIN:-lo}
MAX=${STRAND_BENCH_MAX:-1M}
echo "tcp;ofi_rxm on $DOMAIN, intervals 10000 and 100 us, $REPEAT rounds, output in $OUT"
r=0
while [ "$r" -lt "$REPEAT" ]; do
  r=$((r + 1))
  for iv in 10000 100; do
    FI_PROVIDER='tcp;ofi_rxm' STRAND_OFI_DOMAINS="$DOMAIN" FI_OFI_RXM_CM_PROGRESS_INTERVAL=$iv \
      timeout -k 5 300 "$CONFORM" perf --min-bytes 8 --max-bytes "$MAX" --step-factor 4 \
      --no-bidir --json "$OUT/perf_${iv}_$r.json" "$PLUGIN" >"$OUT/perf_${iv}_$r.txt" \
      2>"$OUT/perf_${iv}_$r.err"
    echo "round $r interval $iv us: exit $?"
  done
done

python3 - "$OUT" <<'EOF'
import glob, json, sys
out = sys.argv[1]
lat, bw, meta = {}, {}, {}
for path in sorted(glob.glob(f"{out}/perf_*_*.json")):
    iv = int(path.rsplit("/", 1)[1].split("_")[1])
    try:
        perf = json.load(open(path))
    except (OSError, ValueError):
        continue
    meta = perf
    for t in perf.get("tables", []):
        for row in t.get("rows", []):
            b = row.get("bytes")
            if "p50_us" in row:
                k = (iv, b)
                if k not in lat or row["p50_us"] < lat[k]:
                    lat[k] = row["p50_us"]
            elif ("algbw_gbps" in row and t.get("direction") == "uni" and t.get("group", 1) == 1
                  and "depth" in t):
                k = (iv, b)
                v = row["algbw_gbps"] * 1000.0  # GB/s -> MB/s
                if v > bw.get(k, 0):
                    bw[k] = v
sizes = sorted({b for (_, b) in list(lat) + list(bw)})
def sz(b):
    for u, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {u}"
    return f"{b} B"
def cell(v, f):
    return f.format(v) if v else "–"
rows = ["| size | half-RTT p50 µs, 10000 | half-RTT p50 µs, 100 | ratio | streaming MB/s, 10000 "
        "| streaming MB/s, 100 | ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
for b in sizes:
    l0, l1, w0, w1 = lat.get((10000, b)), lat.get((100, b)), bw.get((10000, b)), bw.get((100, b))
    rows.append("| " + " | ".join([sz(b), cell(l0, "{:.1f}"), cell(l1, "{:.1f}"),
                                   f"{l1 / l0:.2f}×" if l0 and l1 else "–", cell(w0, "{:.0f}"),
                                   cell(w1, "{:.0f}"), f"{w1 / w0:.2f}×" if w0 and w1 else "–"])
                + " |")
table = "\n".join(rows)
head = f"tcp;ofi_rxm, date {meta.get('date', '?')}, host {meta.get('host', '?')}\n\n"
open(f"{out}/table.md", "w").write(head + table + "\n")
print(head + table)
EOF
