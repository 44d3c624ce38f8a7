#!/bin/sh
# strand-ib against raw verbs, both on tests/softverbs, in the same run (docs/benchmarks/ib.md):
#   ib_bench.sh BUILD_DIR [ROUNDS]
# Each round runs softverbs' sv_bench (RC RDMA-write bandwidth at depth 8; 8-byte
# write-with-immediate ping-pong) and `strand-conform perf` through strand-ib (bw-uni at depth 8;
# ping-pong latency), then prints one markdown table of the best round per size: raw vs plugin
# and their ratio. A benchmark, never a test: nothing is asserted.
set -eu
B=${1:?usage: ib_bench.sh BUILD_DIR [ROUNDS]}
ROUNDS=${2:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/ibbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  "$B/tests/softverbs/sv_bench" --min 8 --max 64M --depth 8 --lat-iters 2000 --csv > "$W/raw$r.csv"
  LD_LIBRARY_PATH="$B/tests/softverbs" "$B/tests/conform/strand-conform" perf --step-factor 4 \
    --min-bytes 8 --max-bytes 64M --no-bidir --time 0.3 --json "$W/ib$r.json" \
    "$B/net_ib/libnccl-net-strand-ib.so" > /dev/null
  r=$((r + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W" "$ROUNDS" <<'PY'
import csv, json, os, sys
w, rounds = sys.argv[1], int(sys.argv[2])
raw_bw, raw_lat, ib_bw, ib_lat = {}, [], {}, {}
for r in range(1, rounds + 1):
    for row in csv.reader(open(os.path.join(w, "raw%d.csv" % r))):
        if row and row[0] == "write_bw":
            raw_bw[int(row[1])] = max(raw_bw.get(int(row[1]), 0), float(row[5]))
        elif row and row[0] == "lat_write_imm":
            raw_lat.append(float(row[5]))  # p50
    for t in json.load(open(os.path.join(w, "ib%d.json" % r)))["tables"]:
        for row in t["rows"]:
            s = row["bytes"]
            if t["id"] == "perf.latency":
                ib_lat[s] = min(ib_lat.get(s, 1e18), row["p50_us"])
            elif t["id"] == "perf.bw-uni":
                ib_bw[s] = max(ib_bw.get(s, 0), row["algbw_gbps"])
print("| size | raw RDMA write GB/s (sv_bench) | strand-ib GB/s (perf bw-uni) | ratio |")
print("|---:|---:|---:|---:|")
for s in sorted(set(raw_bw) & set(ib_bw)):
    print("| %d | %.3f | %.3f | %s |" % (s, raw_bw[s], ib_bw[s],
          "%.0f %%" % (100 * ib_bw[s] / raw_bw[s]) if raw_bw[s] > 0 else "-"))
if raw_lat and 8 in ib_lat:
    best = min(raw_lat)
    print("\n8-byte half round trip, p50, best of %d rounds: raw %.2f us, strand-ib %.2f us "
          "(%.2fx)" % (rounds, best, ib_lat[8], ib_lat[8] / best))
PY
