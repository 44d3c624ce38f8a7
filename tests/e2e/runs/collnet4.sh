#!/usr/bin/env bash
# GPU-RUN (session 8, collnet): several streams of net comms per peer pair
# (STRAND_COLLNET_STREAMS) and all-gather receives posted before the reduction
# (STRAND_COLLNET_EARLY_AG) against main's behaviour (one stream, receives after the reduction,
# the same build) and the ring through strand-socket, all-reduce at 1M,16M,128M,1G, 2 ranks (GPUs
# 0,1), three alternating rounds: ring, main, 4 streams (the default at 2 ranks), 8 streams,
# 4 streams of 1 MiB chunks (a call's two halves on two streams at once), early receives alone
# (1 stream), 8 streams of 512 KiB chunks in 32 slots (all with early receives). Then the CollNet
# correctness check at 2 ranks with this tree's defaults and, time permitting, with 8 streams of
# small chunks; with 4 GPUs one 4-rank round instead (ring, main, the default there: 1 stream, and
# 4 streams). ~165 s on 2 GPUs, at most 180 s (every phase has a budget and a timeout).
# Output: one file, $OUT/collnet4.txt.
set -u
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}/collnet4.txt
R="NCCL_ALGO=allreduce:Ring"
S=STRAND_COLLNET_STREAMS
K=STRAND_COLLNET_CHUNK_KB
MAIN="$S=1 STRAND_COLLNET_EARLY_AG=0"
four=0
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 4 ] && four=1
{
  echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs; $(nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')"
  echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=3 E2E_SIZES=1M,16M,128M,1G E2E_BUDGET_S=$((four ? 100 : 125)) \
    timeout $((four ? 112 : 137)) tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@ $MAIN" "@CN@ $S=4" "@CN@ $S=8" "@CN@ $S=4 $K=1024" "@CN@ $S=1" "@CN@ $S=8 $K=512 STRAND_COLLNET_SLOTS=32"
  echo "# correctness, 2 ranks, this tree's defaults"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_COLLNET_NODES=2 timeout 18 tests/e2e/collnet_e2e.sh check 2>&1 \
    | grep -E 'PASS|FAIL|WRONG|checks|connected over|Cannot' | head -8
  if [ $four = 1 ] && [ $SECONDS -lt 140 ]; then
    echo "# 4 ranks, one round"
    CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=1M,16M,128M,1G E2E_BUDGET_S=24 timeout 35 \
      tests/e2e/collnet_e2e.sh variants "$R" "@CN@ $MAIN" "@CN@" "@CN@ $S=4"
  elif [ $SECONDS -lt 158 ]; then
    echo "# no 4-rank run (fewer than 4 GPUs, or no time left); correctness at 2 ranks with 8 streams of 256 KiB chunks"
    CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_COLLNET_NODES=2 STRAND_COLLNET_STREAMS=8 STRAND_COLLNET_CHUNK_KB=256 \
      timeout 18 tests/e2e/collnet_e2e.sh check 2>&1 | grep -E 'PASS|FAIL|WRONG|checks|connected over|Cannot' | head -8
  fi
  echo "# done in $SECONDS s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$out"
