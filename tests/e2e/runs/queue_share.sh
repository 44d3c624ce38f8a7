#!/usr/bin/env bash
# Builds and runs queue_share.cu (one GPU): is a copy on another stream stuck behind a kernel that
# waits for it, and why? Writes $OUT/queue_share.txt line by line. QS_SET=1 (default): the runs of
# the table in docs/benchmarks/device-unpack.md; QS_SET=2: the stream-priority runs.
cd "$(dirname "$0")" || exit 1
OUT=${OUT:-/tmp}
nvcc -O2 -o /tmp/queue_share queue_share.cu || exit 1
run() { # ENV... K WITH_K2
  local k2=${*: -1} k=${*: -2:1}
  env "${@:1:$#-2}" timeout 10 /tmp/queue_share "$k" "$k2" >> "$OUT/queue_share.txt" 2>&1 \
    || echo "$*: rc $?" >> "$OUT/queue_share.txt"
}
if [ "${QS_SET:-1}" = 1 ]; then
  for mc in 1 32; do for k in 1 9; do for k2 in 0 1; do run CUDA_DEVICE_MAX_CONNECTIONS=$mc $k $k2; done; done; done
  run CUDA_DEVICE_MAX_CONNECTIONS=32 PRELOAD=0 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=32 PRELOAD=1 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=32 CUDA_MODULE_LOADING=EAGER 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=1 PRELOAD=1 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=EAGER 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=8 PRELOAD=1 9 1
else
  run CUDA_DEVICE_MAX_CONNECTIONS=1 PRELOAD=1 PRIO=1 9 1
  run CUDA_DEVICE_MAX_CONNECTIONS=1 PRELOAD=1 PRIO=1 1 1
  run CUDA_DEVICE_MAX_CONNECTIONS=1 PRELOAD=1 PRIO=0 1 1
  run CUDA_DEVICE_MAX_CONNECTIONS=8 PRELOAD=1 PRIO=0 8 1
  run CUDA_DEVICE_MAX_CONNECTIONS=8 PRELOAD=1 PRIO=1 8 1
fi
