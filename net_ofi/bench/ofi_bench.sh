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
# Both tools run STRAND_BENCH_REPEAT times (default 3), interleaved, and each keeps its best figure
# per size: on a shared machine that filters out the runs another job disturbed, for both alike.
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
# The domain both sides use: STRAND_BENCH_DOMAIN, else the first non-loopback interface the
# provider lists, else lo. Its IPv4 address is where fi_pingpong's client connects.
DOMAIN=${STRAND_BENCH_DOMAIN:-$(FI_PROVIDER="$PROV" fi_info -t FI_EP_RDM -c FI_TAGGED 2>/dev/null |
  sed -n 's/^ *domain: //p' | grep -v '^lo$' | head -n1)}
[ -n "$DOMAIN" ] || DOMAIN=lo
if command -v ip >/dev/null 2>&1; then
  ADDR=$(ip -o -4 addr show dev "$DOMAIN" | awk '{print $4}' | cut -d/ -f1 | head -n1)
else
  ADDR=$(python3 -c 'import fcntl,socket,struct,sys; s=socket.socket(); print(socket.inet_ntoa(fcntl.ioctl(s.fileno(),0x8915,struct.pack("256s",sys.argv[1].encode()))[20:24]))' "$DOMAIN")
fi
if [ -z "$ADDR" ]; then
  echo "no IPv4 address on $DOMAIN" >&2
  exit 1
fi
SIZES="8 64 512 4096 32768 262144 1048576 4194304 16777216"
REPEAT=${STRAND_BENCH_REPEAT:-3}
PORT=$((30000 + $$ % 20000))

# STRAND_BENCH_ITERS fixes fi_pingpong's iteration count (the sockets provider needs ~6 ms per
# fi_pingpong transfer, so the defaults below would run for minutes).
iters_for() {
  if [ -n "${STRAND_BENCH_ITERS:-}" ]; then echo "$STRAND_BENCH_ITERS"
  elif [ "$1" -le 4096 ]; then echo 20000
  elif [ "$1" -le 262144 ]; then echo 4000
  elif [ "$1" -le 1048576 ]; then echo 1000
  elif [ "$1" -le 4194304 ]; then echo 200
  else echo 50; fi
}

echo "provider $PROV, domain $DOMAIN ($ADDR), $REPEAT rounds, output in $OUT"
: >"$OUT/pingpong.txt"
r=0
while [ "$r" -lt "$REPEAT" ]; do
  r=$((r + 1))
  for s in $SIZES; do
    it=$(iters_for "$s")
    PORT=$((PORT + 1))
    timeout -k 2 120 fi_pingpong -p "$PROV" -e rdm -m tagged -d "$DOMAIN" -I "$it" -S "$s" \
      -B "$PORT" >"$OUT/pp_server_${s}_$r.txt" 2>&1 &
    SRV=$!
    sleep 0.3
    timeout -k 2 120 fi_pingpong -p "$PROV" -e rdm -m tagged -d "$DOMAIN" -I "$it" -S "$s" \
      -P "$PORT" "$ADDR" >"$OUT/pp_client_${s}_$r.txt" 2>&1
    sleep 0.2
    kill "$SRV" 2>/dev/null # a failed client must not leave the server waiting
    wait "$SRV" 2>/dev/null
    # data line: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    line=$(grep -E '^[0-9]+[kmg]?[[:space:]]' "$OUT/pp_client_${s}_$r.txt" | tail -n 1)
    echo "$s $line" | tee -a "$OUT/pingpong.txt"
  done
  FI_PROVIDER="$PROV" STRAND_OFI_DOMAINS="$DOMAIN" timeout -k 5 600 "$CONFORM" perf \
    --min-bytes 8 --max-bytes 16M --step-factor 2 --no-bidir --json "$OUT/perf_$r.json" \
    "$PLUGIN" >"$OUT/perf_$r.txt" 2>"$OUT/perf_$r.err"
  echo "strand-conform perf round $r exit $?"
done

python3 - "$OUT" "$PROV" <<'EOF'
import json, sys
out, prov = sys.argv[1], sys.argv[2]
import glob
pp = {}
for line in open(f"{out}/pingpong.txt"):
    f = line.split()
    if len(f) >= 9:
        b, mbs, us = int(f[0]), float(f[6]), float(f[7])
        if b not in pp or us < pp[b][1]:
            pp[b] = (mbs, us)  # best round: MB/sec, usec/xfer
lat, bw, meta = {}, {}, {}
for path in sorted(glob.glob(f"{out}/perf_*.json")):
    try:
        perf = json.load(open(path))
    except (OSError, ValueError):
        continue
    meta = perf
    for t in perf["tables"]:
        for r in t.get("rows", []):
            if "p50_us" in r:
                if r["bytes"] not in lat or r["p50_us"] < lat[r["bytes"]]:
                    lat[r["bytes"]] = r["p50_us"]
            elif "algbw_gbps" in r and t.get("direction") == "uni" and t.get("group", 1) == 1 and "depth" in t and "bytes" not in t:
                v = r["algbw_gbps"] * 1000.0  # GB/s -> MB/s
                if v > bw.get(r["bytes"], 0):
                    bw[r["bytes"]] = v
perf = meta
def sz(b):
    for u, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n: return f"{b // n} {u}"
    return f"{b} B"
rows = ["| size | fi_pingpong half-RTT (µs) | strand-ofi half-RTT p50 (µs) | latency ratio | fi_pingpong MB/s | strand-ofi ping-pong MB/s | ratio | strand-ofi streaming MB/s (depth 8) | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for b in sorted(pp):
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
