#!/usr/bin/env bash
# GPU-RUN 2 (session 7, collnet): the new defaults (16 slots, 2 MiB chunks, each large reduction
# cut over the helper threads) against the ring and against the old defaults (8 slots, 1 MiB) in
# the same call, 2 ranks (2 alternating rounds) and 4 ranks (one); a build with the split off
# (-DCS_SPLIT_MIN=1G) for the split's own share; CollNet correctness checks at 2 and 4 ranks with
# the new defaults. With fewer than 4 GPUs the 4-rank part becomes a third 2-rank round.
# ~160 s on 4 x H200, at most 180 s. Output: one file, $OUT/collnet3.txt.
set -u
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}/collnet3.txt
R="NCCL_ALGO=allreduce:Ring"
OLD="STRAND_COLLNET_SLOTS=8 STRAND_COLLNET_CHUNK_KB=1024"
{
  echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs; $(nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=2 E2E_BUDGET_S=66 timeout 80 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $OLD" "@CN@ STRAND_COLLNET_THREADS=8"
  echo "# 2 ranks, built with -DCS_SPLIT_MIN=1073741824 (no reduction is split), new defaults otherwise"
  vb=build-e2e-nosplit
  mkdir -p $vb
  meson setup $vb . -Dtests=false -Dbuildtype=release -Dc_args=-DCS_SPLIT_MIN=1073741824 >$vb/setup.log 2>&1 || tail -5 $vb/setup.log
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUILD=$vb E2E_ROUNDS=2 E2E_BUDGET_S=14 timeout 25 tests/e2e/collnet_e2e.sh variants "@CN@"
  echo "# correctness, 2 ranks, new defaults"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_COLLNET_NODES=2 timeout 20 tests/e2e/collnet_e2e.sh check 2>&1 \
    | grep -E 'PASS|FAIL|WRONG|checks|connected over|Cannot' | head -12
  if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
    echo "# 4 ranks"
    CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_BUDGET_S=24 timeout 35 tests/e2e/collnet_e2e.sh variants \
      "$R" "@CN@" "@CN@ $OLD" "@CN@ STRAND_COLLNET_THREADS=8"
    echo "# correctness, 4 ranks, new defaults"
    CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_COLLNET_NODES=4 timeout 20 tests/e2e/collnet_e2e.sh check 2>&1 \
      | grep -E 'PASS|FAIL|WRONG|checks|connected over|Cannot' | head -12
  else
    echo "# fewer than 4 GPUs: no 4-rank run; a third 2-rank round instead"
    CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUDGET_S=40 timeout 55 tests/e2e/collnet_e2e.sh variants \
      "$R" "@CN@" "@CN@ $OLD" "@CN@ STRAND_COLLNET_SLOTS=32 STRAND_COLLNET_CHUNK_KB=4096"
  fi
  echo "# done in $SECONDS s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$out"
