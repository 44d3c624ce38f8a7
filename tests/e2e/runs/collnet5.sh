#!/usr/bin/env bash
# GPU-RUN 2 (session 8, collnet), written after collnet4.sh's results, run 06:36Z (collnet.md): the final
# defaults (STRAND_COLLNET_STREAMS auto = 4 at 2 ranks, 1 from 4; STRAND_COLLNET_EARLY_AG=0), a
# combination collnet4.sh did not run, against main's behaviour (one stream, the same build), 4
# streams with early receives (collnet4.sh's best at 16 MiB) and the ring through strand-socket,
# all-reduce at 1M,16M,128M,1G, 2 ranks (GPUs 0,1), three alternating rounds; the CollNet
# correctness check with the defaults; with 4 GPUs one 4-rank round (ring, main, defaults).
# ~120 s on 2 GPUs, at most 180 s. Output: one file, $OUT/collnet5.txt.
set -u
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}/collnet5.txt
R="NCCL_ALGO=allreduce:Ring"
S=STRAND_COLLNET_STREAMS
MAIN="$S=1 STRAND_COLLNET_EARLY_AG=0"
four=0
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 4 ] && four=1
{
  echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs; $(nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=3 E2E_SIZES=1M,16M,128M,1G E2E_BUDGET_S=100 timeout 115 \
    tests/e2e/collnet_e2e.sh variants "$R" "@CN@ $MAIN" "@CN@" "@CN@ $S=4 STRAND_COLLNET_EARLY_AG=1"
  echo "# correctness, 2 ranks, this tree's defaults"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_COLLNET_NODES=2 timeout 18 tests/e2e/collnet_e2e.sh check 2>&1 \
    | grep -E 'PASS|FAIL|WRONG|checks|connected over|Cannot' | head -8
  if [ $four = 1 ] && [ $SECONDS -lt 135 ]; then
    echo "# 4 ranks, one round"
    CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=1M,16M,128M,1G E2E_BUDGET_S=24 timeout 35 \
      tests/e2e/collnet_e2e.sh variants "$R" "@CN@ $MAIN" "@CN@"
  fi
  echo "# done in $SECONDS s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$out"
