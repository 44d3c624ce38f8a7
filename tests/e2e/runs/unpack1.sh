#!/usr/bin/env bash
# Issue 26 item 4, 2026-11-29 (session 15): unpack mode with the bounce arena copied to GPU memory
# before each receive is published (design variant E2 of docs/spec/device-unpack.md §5.2), so that
# NCCL's kernel gathers from GPU memory instead of across PCIe. Measured, not landed: apply
# tests/e2e/runs/unpack1-copy.patch to main first (it adds STRAND_SOCKET_UNPACK_COPY=1: a cuMemAlloc
# copy of the arena, and per receive comm a stream and 16 events; test() queues the copy of a
# complete receive, then publishes its records once the copy's event has completed).
# With the CUDA defaults the copy configuration hung at 32 KiB (two launches of two; cause not
# settled, docs/benchmarks/device-unpack.md, "A GPU copy of the arena", and queue_share.sh): the
# launches here set CUDA_DEVICE_MAX_CONNECTIONS=32 and their sizes skip 32 KiB. Measured as one
# launch per device call with these commands; collected here. Runs: `run_e2e.sh unpack` with the
# copy (every element checked), UP_ROUNDS (default 2) rounds of `run_e2e.sh sweep` at 8 B-128 MiB of unpack with the copy, unpack, host
# mode; then the proxy-step profile of the same three and the built-in at 8 B, 64 KiB, 1 MiB.
# One GPU (2 ranks under MPS). Writes $OUT/unpack1.txt.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0
. tests/e2e/unpack_nccl_env.sh # run_e2e.sh's unpack settings
U=$unpack_nccl_env
COPY="STRAND_SOCKET_UNPACK=1 STRAND_SOCKET_UNPACK_COPY=1 CUDA_DEVICE_MAX_CONNECTIONS=32"
# stdbuf: the pipe must not hold back lines when a launch hangs and the call's time runs out.
{
  echo "# unpack1.sh $(date -u +%FT%TZ)"
  STRAND_SOCKET_UNPACK_COPY=1 CUDA_DEVICE_MAX_CONNECTIONS=32 tests/e2e/run_e2e.sh unpack || exit 1
  for ((r = 1; r <= ${UP_ROUNDS:-2}; r++)); do
    E2E_SIZES=8,64K,1M,16M,128M timeout 130 tests/e2e/run_e2e.sh sweep \
      "$COPY NCCL_DEBUG=WARN $U" "STRAND_SOCKET_UNPACK=1 NCCL_DEBUG=WARN $U" "$U"
  done
  E2E_SIZES=8,64K,1M timeout 280 tests/e2e/run_e2e.sh profile "STRAND_SOCKET_UNPACK=1 $U" "$COPY $U" "$U"
} 2>&1 | stdbuf -oL grep -v 'NCCL INFO' | tee "$OUT/unpack1.txt"
