#!/usr/bin/env bash
# GPU-RUN (session 7, collnet): what bounds CollNet all-reduce through strand-socket at 2 and 4
# ranks, one rank per GPU, against the ring in the same call. Knobs compared (all run time, one
# build): STRAND_COLLNET_SLOTS (chunks in flight), STRAND_COLLNET_CHUNK_KB (chunk size),
# NCCL_BUFFSIZE (NCCL's CollNet staging per call, ring too for fairness), strand-socket's
# MIN_CHUNK, helper threads. ~160 s on 4 x H200, at most 185 s (every phase has a budget and a timeout). Output: $OUT/collnet2.txt.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}/collnet2.txt
R="NCCL_ALGO=allreduce:Ring"
B16="NCCL_BUFFSIZE=16777216"
S=STRAND_COLLNET_SLOTS
K=STRAND_COLLNET_CHUNK_KB
{
  echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs; $(nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')"
  echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUDGET_S=85 timeout 105 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $S=16" "@CN@ $S=32" "@CN@ $K=4096" "@CN@ $S=32 $K=4096" "@CN@ $B16" \
    "@CN@ $B16 $S=32 $K=4096" "@CN@ $S=32 STRAND_SOCKET_MIN_CHUNK=32768" \
    "@CN@ $S=32 STRAND_COLLNET_THREADS=8" "$R $B16"
  echo "# second round, 2 ranks"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUDGET_S=15 timeout 30 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $S=32 $K=4096" "@CN@ $B16 $S=32 $K=4096"
  echo "# 4 ranks"
  CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_BUDGET_S=35 timeout 50 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $S=32" "@CN@ $S=32 $K=4096" "@CN@ $B16 $S=32 $K=4096" "$R $B16"
  echo "# done in $SECONDS s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$out"
