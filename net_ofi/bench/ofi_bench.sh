#!/bin/sh
# strand-ofi against libfabric's own fi_pingpong, same provider, same sizes, one run.
#
#   net_ofi/bench/ofi_bench.sh PROVIDER STRAND_CONFORM PLUGIN_SO [OUTDIR]
#
# 1. fi_pingpong (package libfabric-bin), RDM endpoint, tagged messages, server and client on this
#    host over the same domain the plugin uses, one size at a time. It reports half the round trip
#    (usec/xfer) and size / half-round-trip (MB/sec): one message in flight.
# 2. strand-conform perf on the plugin with the same FI_PROVIDER: ping-pong latency (half the round
#    trip, median) and streaming bandwidth with 8 messages in flight, the way NCCL drives a plugin.
# 3. One markdown table (OUTDIR/table.md) with both and the ratios; raw outputs beside it.
# A benchmark, not a test: nothing is asserted. Every wait is bounded by `timeout`.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 PROVIDER STRAND_CONFORM PLUGIN_SO [OUTDIR]" >&2
  exit 2
fi
PROV=$1
CONFORM=$2
PLUGIN=$3
OUT=${4:-$(mktemp -d "${TMPDIR:-/tmp}/ofi-bench.XXXXXX")}
mkdir -p "$OUT"
DOMAIN=${STRAND_BENCH_DOMAIN:-$(ip -o -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')}
[ -n "$DOMAIN" ] || DOMAIN=lo
ADDR=$(ip -o -4 addr show dev "$DOMAIN" | awk '{print $4}' | cut -d/ -f1 | head -n1)
SIZES="8 64 512 4096 32768 262144 1048576 4194304 16777216"
PORT=$((30000 + $$ % 20000))

iters_for() {
  if [ "$1" -le 4096 ]; then echo 20000
  elif [ "$1" -le 262144 ]; then echo 4000
  elif [ "$1" -le 1048576 ]; then echo 1000
  else echo 200; fi
}

echo "provider $PROV, domain $DOMAIN ($ADDR), output in $OUT"
: >"$OUT/pingpong.txt"
for s in $SIZES; do
  it=$(iters_for "$s")
  PORT=$((PORT + 1))
  timeout -k 2 120 fi_pingpong -p "$PROV" -e rdm -m tagged -d "$DOMAIN" -I "$it" -S "$s" -B "$PORT" \
    >"$OUT/pp_server_$s.txt" 2>&1 &
  SRV=$!
  sleep 0.3
  timeout -k 2 120 fi_pingpong -p "$PROV" -e rdm -m tagged -d "$DOMAIN" -I "$it" -S "$s" -P "$PORT" \
    "$ADDR" >"$OUT/pp_client_$s.txt" 2>&1
  wait "$SRV"
  # data line: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
  line=$(grep -E '^[0-9]+[kmg]?[[:space:]]' "$OUT/pp_client_$s.txt" | tail -n 1)
  echo "$s $line" | tee -a "$OUT/pingpong.txt"
done

FI_PROVIDER="$PROV" timeout -k 5 600 "$CONFORM" perf --min-bytes 8 --max-bytes 16M --step-factor 8 \
  --no-bidir --json "$OUT/perf.json" "$PLUGIN" >"$OUT/perf.txt" 2>"$OUT/perf.err"
echo "strand-conform perf exit $?"

python3 - "$OUT" "$PROV" <<'EOF'
import json, sys
out, prov = sys.argv[1], sys.argv[2]
pp = {}
for line in open(f"{out}/pingpong.txt"):
    f = line.split()
    if len(f) >= 9:
        pp[int(f[0])] = (float(f[6]), float(f[7]))  # MB/sec, usec/xfer
perf = json.load(open(f"{out}/perf.json"))
lat, bw = {}, {}
for t in perf["tables"]:
    for r in t.get("rows", []):
        if "p50_us" in r and "depth" not in t:
            lat[r["bytes"]] = r["p50_us"]
        elif "algbw_gbps" in r and t.get("direction") == "uni" and t.get("group", 1) == 1 and "depth" in t and "bytes" not in t:
            bw[r["bytes"]] = r["algbw_gbps"] * 1000.0  # GB/s -> MB/s
def sz(b):
    for u, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n: return f"{b // n} {u}"
    return f"{b} B"
rows = ["| size | fi_pingpong half-RTT (µs) | strand-ofi half-RTT p50 (µs) | latency ratio | fi_pingpong MB/s | strand-ofi ping-pong MB/s | ratio | strand-ofi streaming MB/s (depth 8) | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for b in sorted(set(pp) | set(lat) | set(bw)):
    p = pp.get(b); l = lat.get(b); w = bw.get(b)
    cells = [sz(b)]
    cells.append(f"{p[1]:.1f}" if p else "–")
    cells.append(f"{l:.1f}" if l else "–")
    cells.append(f"{l / p[1]:.2f}×" if p and l else "–")
    cells.append(f"{p[0]:.0f}" if p else "–")
    pw = b / l if l else None  # bytes/µs == MB/s
    cells.append(f"{pw:.0f}" if pw else "–")
    cells.append(f"{pw / p[0] * 100:.0f} %" if pw and p and p[0] else "–")
    cells.append(f"{w:.0f}" if w else "–")
    cells.append(f"{w / p[0] * 100:.0f} %" if w and p and p[0] else "–")
    rows.append("| " + " | ".join(cells) + " |")
table = "\n".join(rows)
open(f"{out}/table.md", "w").write(f"provider `{prov}`, date {perf.get('date','?')}, host {perf.get('host','?')}\n\n" + table + "\n")
print(table)
EOF
