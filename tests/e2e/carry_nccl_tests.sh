#!/usr/bin/env bash
# Copies a checkout of NVIDIA's nccl-tests (github.com/NVIDIA/nccl-tests) into the git-ignored
# .e2e-carry-nccl-tests/ of the repository root, for the GPU machines, which cannot reach GitHub;
# name .e2e-carry-nccl-tests in the `device` tool's carry list and `tests/e2e/run_e2e.sh nccl-tests`
# builds it there. SRC is a work tree or a git directory (bare clones too: `git archive REF`).
#   tests/e2e/carry_nccl_tests.sh SRC [REF]     (REF: git only, default HEAD)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:?usage: carry_nccl_tests.sh NCCL_TESTS_CHECKOUT_OR_GIT_DIR [REF]}
ref=${2:-HEAD}
out=$root/.e2e-carry-nccl-tests
rm -rf "$out"
mkdir -p "$out"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1 && { [ "$(git -C "$src" rev-parse --is-bare-repository)" = true ] || [ $# -gt 1 ]; }; then
  git -C "$src" archive "$ref" | tar -x -C "$out"
  echo "$(git -C "$src" rev-parse "$ref")" >"$out/CARRIED_COMMIT"
else
  (cd "$src" && tar -c --exclude=.git --exclude=build .) | tar -x -C "$out"
fi
test -f "$out/src/common.cu" || { echo "$src is not an nccl-tests tree (no src/common.cu)" >&2; exit 1; }
ver=$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$out/src/common.h")
echo "carried nccl-tests $ver to $out ($(du -sh "$out" | cut -f1))"
