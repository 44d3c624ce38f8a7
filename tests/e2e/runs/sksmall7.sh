#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28: the control hand-off with a size rule, paired within rounds.
# sksmall6.sh (10 rounds, 2 x H200) measured the hand-off for every control write 1-3 us slower at
# 8-128 B and 1.2x faster at 64 KiB (115.6 -> 93.7 us) than strand-socket's default (off), the
# fourth call to show that 64 KiB gain. STRAND_SOCKET_HANDOFF_MIN_BYTES keeps small writes with the
# proxy thread; if 4096 keeps the gain and loses nothing, it becomes the default. Configurations
# (one `run_e2e.sh sweep` per round, order rotating; the built-in Socket with the plugin off):
#   strand-socket defaults | hand-off >= 4 KiB | hand-off >= 1 KiB | hand-off, every write |
#   built-in Socket default | built-in Socket tuned;
# all-reduce 8 B .. 128 MiB, 2 ranks, up to 10 rounds (4 ranks too where 4 GPUs are). < 4 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall7; rm -rf "$D"; mkdir -p "$D"
S=8,64,1K,8K,32K,64K,256K,1M,16M,128M
B='NCCL_NET_PLUGIN=none NCCL_NET=Socket'
H=STRAND_SOCKET_HANDOFF
NG=$(nvidia-smi -L | wc -l)
echo "# $NG GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(nproc) CPUs, $(date -u +%FT%TZ)"
CFGS=('' "$H=1 ${H}_MIN_BYTES=4096" "$H=1 ${H}_MIN_BYTES=1024" "$H=1" "$B" "$B NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8")
k=${#CFGS[@]}
RANKS=2; [ "$NG" -ge 4 ] && RANKS="2 4"
RANKS=${SK_RANKS:-$RANKS} # SK_RANKS=4: the 4-rank rounds only (a second call on a 4-GPU host)
for r in $(seq 1 10); do
  rot=(); for ((i = 0; i < k; i++)); do rot+=("${CFGS[$(((i + r) % k))]}"); done
  for n in $RANKS; do
    dev=0,1; [ "$n" = 4 ] && dev=0,1,2,3
    mkdir -p "$D/n$n"
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 120 tests/e2e/run_e2e.sh sweep "${rot[@]}" > "$D/n$n/n$n-r$r.txt" 2>&1
  done
  echo "# round $r done at ${SECONDS}s"
  if (( SECONDS > 190 )); then echo "# stopping after round $r"; break; fi
done
for n in $RANKS; do python3 tests/e2e/runs/paired_table.py "$D/n$n"; done
tar czf "$OUT/sksmall7.tgz" -C build-e2e sksmall7
echo "# total ${SECONDS}s"
