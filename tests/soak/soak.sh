#!/usr/bin/env bash
# Soak test of every Strand plugin (tests/soak/README.md): soak-driver for N minutes per plugin,
# then one verdict table. Not part of `meson test`; runs from any copy of the tree that has a build
# directory with the plugins, soak-driver and (for strand-ib) softverbs built.
#
#   tests/soak/soak.sh [--build-dir DIR] [--minutes N] [--only a,b,...] [--parallel]
#                      [--max-rss-growth-mib M] [--out FILE]
#
# Plugins (ids for --only): socket, ofi-sockets, ofi-tcp (tcp;ofi_rxm), ib (strand-ib over
# softverbs), collnet (collnet_stub over strand-socket, 2 ranks), collnet-ib (over strand-ib,
# 3 ranks). --parallel runs them all at once (a many-core machine); otherwise one after another.
# Exit status: 0 when every plugin's verdict is PASS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../../build"
minutes=10
only=""
parallel=0
growth=32
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --parallel) parallel=1; shift ;;
    --max-rss-growth-mib) growth=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd) || exit 2
driver="$build/tests/soak/soak-driver"
[ -x "$driver" ] || { echo "soak.sh: $driver not built (ninja -C $build tests/soak/soak-driver)" >&2; exit 2; }
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
interval=$(( seconds / 12 )); [ "$interval" -lt 5 ] && interval=5
logdir=$(mktemp -d /tmp/strand-soak.XXXXXX)

socket="$build/net_socket/libnccl-net-strand-socket.so"
ofi="$build/net_ofi/libnccl-net-strand-ofi.so"
ib="$build/net_ib/libnccl-net-strand-ib.so"
sv="$build/tests/softverbs"
# id | plugin .so | driver arguments | environment
configs=(
  "socket|$socket|--mode net|"
  "ofi-sockets|$ofi|--mode net|FI_PROVIDER=sockets"
  "ofi-tcp|$ofi|--mode net|FI_PROVIDER=tcp;ofi_rxm"
  "ib|$ib|--mode net|LD_LIBRARY_PATH=$sv SOFTVERBS_NDEVS=1"
  "collnet|$socket|--mode collnet --ranks 2|NCCL_COLLNET_ENABLE=1"
  "collnet-ib|$ib|--mode collnet --ranks 3|NCCL_COLLNET_ENABLE=1 LD_LIBRARY_PATH=$sv SOFTVERBS_NDEVS=1"
)

selected() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

run_one() { # id so args env
  local id=$1 so=$2 args=$3 env=$4 log="$logdir/$1.log"
  if [ ! -f "$so" ]; then
    echo "SOAK-RESULT name=$id verdict=SKIP why=not-built" >"$log"
    return
  fi
  # shellcheck disable=SC2086  # args and env are word lists
  env $env "$driver" --plugin "$so" --name "$id" --seconds "$seconds" --interval "$interval" \
    --max-rss-growth-mib "$growth" $args 2>&1 | tee "$log" | grep --line-buffered -v '^SOAK-RESULT'
}

echo "soak.sh: $minutes min per plugin, build $build, logs $logdir, $(nproc) cores, $(date -u '+%F %T') UTC"
pids=()
for c in "${configs[@]}"; do
  IFS='|' read -r id so args env <<<"$c"
  selected "$id" || continue
  if [ "$parallel" = 1 ]; then
    run_one "$id" "$so" "$args" "$env" &
    pids+=($!)
  else
    run_one "$id" "$so" "$args" "$env"
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

# The verdict table, from each log's SOAK-RESULT line (a driver that died leaves none: FAIL).
table=$(
  echo "| plugin | seconds | RSS start | RSS end | growth (bound) | fds start/end | threads start/end | epochs | comms opened | messages | moved | errors | verdict |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for c in "${configs[@]}"; do
    IFS='|' read -r id _ <<<"$c"
    selected "$id" || continue
    line=$(grep -h '^SOAK-RESULT' "$logdir/$id.log" 2>/dev/null | tail -1)
    if [ -z "$line" ]; then
      echo "| $id | | | | | | | | | | | | FAIL (no result: the driver died, see $logdir/$id.log) |"
      continue
    fi
    echo "$line" | awk '{
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (v["verdict"] == "SKIP") { printf "| %s | | | | | | | | | | | | SKIP (not built) |\n", v["name"]; exit }
      printf "| %s | %s | %.1f MiB | %.1f MiB | %+.1f MiB (%.0f) | %s/%s | %s/%s | %s | %s | %s | %.1f GiB | %s | %s |\n",
        v["name"], v["seconds"], v["rss_start_kib"] / 1024, v["rss_end_kib"] / 1024, v["rss_growth_kib"] / 1024,
        v["rss_bound_kib"] / 1024, v["fds_start"], v["fds_end"], v["threads_start"], v["threads_end"],
        v["epochs"], v["comms"], v["msgs"], v["bytes"] / 1073741824, v["errors"], v["verdict"] }'
  done
)
echo
echo "$table"
[ -n "$out" ] && echo "$table" >"$out"
if echo "$table" | grep -q 'FAIL'; then
  echo "soak.sh: FAIL (logs in $logdir)"
  exit 1
fi
echo "soak.sh: every plugin PASS"
