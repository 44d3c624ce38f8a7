#!/usr/bin/env bash
# GPU-RUN (session 7, collnet): what bounds CollNet all-reduce through strand-socket at 2 and 4
# ranks, one rank per GPU, against the ring in the same call. Knobs compared (all run time, one
# build): STRAND_COLLNET_SLOTS (chunks in flight), STRAND_COLLNET_CHUNK_KB (chunk size),
# NCCL_BUFFSIZE (NCCL's CollNet staging per call; the ring with it too, for fairness),
# strand-socket's MIN_CHUNK; and a second build with -DCS_AG_HEADER=1 (the all-gather's header
# message kept, as on main) against this tree's default (none). ~150 s on 4 x H200, at most 180 s
# (every phase has a budget and a timeout). Output: one file, $OUT/collnet2.txt.
set -u
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp}/collnet2.txt
R="NCCL_ALGO=allreduce:Ring"
B16="NCCL_BUFFSIZE=16777216"
S=STRAND_COLLNET_SLOTS
K=STRAND_COLLNET_CHUNK_KB
{
  echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs; $(nvidia-smi -L 2>/dev/null | head -4 | tr '\n' ';')"
  echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUDGET_S=78 timeout 95 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $S=16" "@CN@ $S=32" "@CN@ $S=32 $K=4096" "@CN@ $B16" \
    "@CN@ $B16 $S=32 $K=4096" "@CN@ $S=32 STRAND_SOCKET_MIN_CHUNK=32768" "$R $B16"
  echo "# 2 ranks, built with -DCS_AG_HEADER=1 (all-gather header kept, as on main)"
  vb=build-e2e-aghdr
  mkdir -p $vb
  meson setup $vb . -Dtests=false -Dbuildtype=release -Dc_args=-DCS_AG_HEADER=1 >$vb/setup.log 2>&1 || tail -5 $vb/setup.log
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_BUILD=$vb E2E_BUDGET_S=30 timeout 40 tests/e2e/collnet_e2e.sh variants \
    "@CN@" "@CN@ $S=32 $K=4096"
  echo "# 4 ranks"
  CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_BUDGET_S=32 timeout 45 tests/e2e/collnet_e2e.sh variants \
    "$R" "@CN@" "@CN@ $S=32" "@CN@ $S=32 $K=4096" "@CN@ $B16 $S=32 $K=4096" "$R $B16"
  echo "# done in $SECONDS s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$out"
