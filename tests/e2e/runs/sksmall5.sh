#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28: the channel count behind strand-socket's 1-3 us at 8-128 B.
# sksmall4.sh (5 rotated rounds, 2 x H200) found STRAND_SOCKET_TUNER=0 and STRAND_SOCKET_NTHREADS=0
# no faster than the defaults, but NCCL_MAX_NCHANNELS=2 1-3 us faster, although a collective of
# these sizes runs on one channel either way. Here, all in one sweep so that the order rotates:
#   strand-socket with NCCL's channel count capped at 1, 2, 4 and uncapped (8 here);
#   NCCL's built-in Socket (plugin off) with its own count and forced to 4 and to 8 channels;
# all-reduce 8 B .. 1 KiB, 2 ranks, 5 rounds; then, per configuration, NCCL's INIT/TUNING lines
# for an 8 B all-reduce (channels opened, algorithm/protocol/channels chosen). < 4 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall5; rm -rf "$D"; mkdir -p "$D"
S=8,16,64,128,1K
B='NCCL_NET_PLUGIN=none NCCL_NET=Socket'
echo "# $(nvidia-smi -L | wc -l) GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(nproc) CPUs"
CFGS=('' 'NCCL_MAX_NCHANNELS=1' 'NCCL_MAX_NCHANNELS=2' 'NCCL_MAX_NCHANNELS=4' "$B" "$B NCCL_MIN_NCHANNELS=4" "$B NCCL_MIN_NCHANNELS=8")
k=${#CFGS[@]}
for r in 1 2 3 4 5; do
  rot=(); for ((i = 0; i < k; i++)); do rot+=("${CFGS[$(((i + r) % k))]}"); done
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=$S timeout 120 tests/e2e/run_e2e.sh sweep "${rot[@]}" > "$D/n2-r$r.txt" 2>&1
  echo "# round $r done at ${SECONDS}s"
  if (( SECONDS > 170 )); then echo "# stopping after round $r"; break; fi
done
python3 tests/e2e/runs/sksmall_table.py "$D"/n2-r*.txt | sed "s/strand $B/built-in/g"
i=0
for cfg in '' 'NCCL_MAX_NCHANNELS=2' "$B" "$B NCCL_MIN_NCHANNELS=8"; do
  i=$((i + 1))
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=8 timeout 60 tests/e2e/run_e2e.sh sweep \
    "$cfg NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV" > /dev/null 2>&1
  cp build-e2e/log.sweep.rank0 "$D/info$i.rank0"
  echo "## [$cfg] channels and choices for 8 B:"
  grep -hE 'coll channels|AllReduce|Pattern' "$D/info$i.rank0" | sed 's/^.*NCCL INFO //' | sort | uniq -c | sort -rn | head -12
done
tar czf "$OUT/sksmall5.tgz" -C build-e2e sksmall5
echo "# total ${SECONDS}s"
