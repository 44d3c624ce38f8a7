#!/usr/bin/env bash
# Collects NCCL's own device-API examples (examples/ and the makefiles/ they include) from a local
# clone of NCCL's public repository, for the GPU machines, which cannot reach it. The directory is
# git-ignored and travels with the `device` tool's carry list; tests/e2e/gin_e2e.sh builds the GIN
# examples from it against the NCCL it finds there.
#   tests/e2e/carry_nccl_examples.sh NCCL_GIT_DIR [TAG...]   (default tag v2.28.9-1)
# writes .e2e-carry-nccl/<tag>/{examples,makefiles} in the repository root.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:?usage: carry_nccl_examples.sh NCCL_GIT_DIR [TAG...]}
shift
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=(v2.28.9-1)
for tag in "${tags[@]}"; do
  out=$root/.e2e-carry-nccl/$tag
  rm -rf "$out"
  mkdir -p "$out"
  git -C "$src" archive "$tag" examples makefiles | tar -x -C "$out"
  echo "carried NCCL $tag examples to $out ($(du -sh "$out" | cut -f1))"
done
