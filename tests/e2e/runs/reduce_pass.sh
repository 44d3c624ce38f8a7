#!/usr/bin/env bash
# Builds and runs tests/e2e/runs/reduce_pass.c (one pass or n-1 passes for a CollNet block's
# reduction; see its header) at the block sizes of NCCL's CollNet calls: 1835008 B / 4 ranks
# (448 KiB x 4 sources), / 3, / 2 (896 KiB x 2), and a 4 MiB block x 4. Needs only gcc.
set -eu
cd "$(dirname "$0")/../../.."
out=${TMPDIR:-/tmp}/strand-reduce-pass
gcc -O2 -std=c11 -Iplugin_api/include -o "$out" tests/e2e/runs/reduce_pass.c plugin_api/src/reduce.c -lm
lscpu | grep -E 'Model name|L1d|L2|L3' || true
for a in "458752 4" "611669 3" "917504 2" "4194304 4"; do "$out" $a; done
