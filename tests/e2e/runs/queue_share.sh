#!/usr/bin/env bash
# Builds and runs queue_share.cu (one GPU): is a copy on another stream stuck behind a kernel that
# waits for it, and why? Writes $OUT/queue_share.txt line by line.
cd "$(dirname "$0")" || exit 1
OUT=${OUT:-/tmp}
nvcc -O2 -o /tmp/queue_share queue_share.cu || exit 1
run() { env "$@" timeout 10 /tmp/queue_share 9 1 >> "$OUT/queue_share.txt" 2>&1 || echo "$*: rc $?" >> "$OUT/queue_share.txt"; }
run CUDA_DEVICE_MAX_CONNECTIONS=32 PRELOAD=0
run CUDA_DEVICE_MAX_CONNECTIONS=32 PRELOAD=1
run CUDA_DEVICE_MAX_CONNECTIONS=32 CUDA_MODULE_LOADING=EAGER
run CUDA_DEVICE_MAX_CONNECTIONS=1 PRELOAD=1
run CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=EAGER
run CUDA_DEVICE_MAX_CONNECTIONS=8 PRELOAD=1
