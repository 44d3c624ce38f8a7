#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28 (session 9): strand-socket at 16-1 KiB at 4 ranks, many paired rounds.
# sksmall7.sh (7 rounds, 4 x H200) left 64 B at 0.91x the built-in tuned / 0.96x its default, with
# configurations identical at 64 B spreading 2.2 µs in that call. Here only four configurations,
# as many rounds as fit in ~230 s: strand-socket's defaults, the same again (E2E_NAME=twin: the
# launch-to-launch control), the built-in Socket's defaults and its hand tuning.
# Needs 4 GPUs. Writes $OUT/sksmall8.tgz and prints the table (tests/e2e/runs/paired_table.py).
set -u
cd "$(dirname "$0")/../../.."
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0 E2E_SIZES=16,64,256,1K,8K
B=$PAIRED_BUILTIN
paired_banner
[ "$(gpu_count)" -ge 4 ] || { echo "# fewer than 4 GPUs: nothing to do"; exit 0; }
D=build-e2e/sksmall8; rm -rf "$D"
paired_rounds "$D" 4 40 "${SK_BUDGET_S:-230}" 'E2E_NAME=strand' 'E2E_NAME=twin' "$B" \
  "$B NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8"
python3 tests/e2e/runs/paired_table.py "$D"
tar czf "${OUT:-build-e2e}/sksmall8.tgz" -C build-e2e sksmall8
