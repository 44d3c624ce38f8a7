#!/usr/bin/env bash
# Real-NCCL CollNet runs of strand-socket's collnet_stub (docs/plugins/collnet.md), on a GPU
# machine, not in CI. A wrapper around run_e2e.sh (which builds the plugin with the stub linked,
# the default, and the driver, and runs one process per fake node under NCCL_HOSTID; on a one-GPU
# machine under CUDA MPS): run_e2e.sh passes the caller's environment through to every rank.
#
#   tests/e2e/collnet_e2e.sh check   for N in E2E_COLLNET_NODES (default "2 4"):
#       1. run_e2e.sh check with CollNet on and all-reduce forced to CollNetChain: every all-reduce
#          (5 types x 4 ops x 4 counts), all-gather, reduce-scatter, broadcast and send/recv result
#          is checked. A forced algorithm that NCCL cannot use fails the call (ncclInvalidUsage),
#          so passing results are also proof that CollNet was set up;
#       2. a short all-reduce run with NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,COLL whose log must name
#          CollNet and must not say "Cannot initialize CollNet"; the lines are printed.
#   tests/e2e/collnet_e2e.sh bench   for N in E2E_COLLNET_NODES: ring vs CollNet all-reduce over
#       strand-socket, 8 B .. 1 GiB (E2E_SIZES), both in one run (docs/benchmarks/collnet.md).
#   tests/e2e/collnet_e2e.sh copies  2 ranks (NRANKS), E2E_ROUNDS (default 2) alternating rounds of
#       ring / CollNet as built from git rev E2E_COLLNET_OLD_REV (default main; needs git and that
#       rev in this checkout, built with `git archive` into $E2E_BUILD-old) / CollNet of this tree,
#       all-reduce at E2E_SIZES (default 32K,2M,16M,128M,1G), printing every CollNet run's
#       `closing:` lines (where the stub's time went); without git (or the rev) the old column is
#       this tree with STRAND_COLLNET_DIRECT=0 (every byte staged, as before the no-copy path);
#       E2E_COLLNET_OLD_SRC=DIR takes the old tree from DIR instead (e.g. a `git archive` made
#       before the run, for a copy of the tree without .git). E2E_COLLNET_VARIANT='-DNAME=V ...'
#       adds a fourth configuration: this tree built with those C flags (e.g. -DCS_NSLOTS=16) into
#       $E2E_BUILD-variant.
#       Then, time permitting (E2E_BUDGET_S, default 200 s spent), the correctness check above at 2
#       ranks. Exit 1 on a failed run or check.
#   tests/e2e/collnet_e2e.sh variants 'ENV..'...   NRANKS ranks, E2E_ROUNDS (default 1) rounds: each
#       argument is one configuration (environment assignments, e.g. the ring's
#       "NCCL_ALGO=allreduce:Ring" or CollNet's with STRAND_COLLNET_SLOTS=32), run as run_e2e.sh
#       sweep at E2E_SIZES (default 32K,16M,128M,1G), each followed by its ranks' `closing:` lines
#       (docs/plugins/collnet.md) and, for CollNet, strand-socket's close lines of rank 0's first
#       receive connections (CTSs written). `@CN@` in an argument stands for the CollNet settings
#       ($collnet_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET). A round stops starting
#       configurations once E2E_BUDGET_S (default 150) s are spent.
#
# On one-GPU fake nodes NCCL 2.28 can only use CollNetChain, and only for all-reduce: all-gather and
# reduce-scatter run as Ring there whatever the plugin offers (docs/plugins/collnet.md, "How NCCL
# decides"). Environment: as run_e2e.sh (NCCL_HOME, CUDA_HOME, E2E_BUILD).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${E2E_BUILD:-$root/build-e2e}
mode=${1:-check}
collnet_env="NCCL_COLLNET_ENABLE=1 NCCL_NET_MERGE_LEVEL=LOC NCCL_ALGO=allreduce:CollNetChain"
fail=0

# The `copies` mode (see the top): ring vs the stub before vs the stub now, alternating.
copies() {
  local t0=$SECONDS rc=0 n=${NRANKS:-2} sizes=${E2E_SIZES:-32K,2M,16M,128M,1G}
  local rev=${E2E_COLLNET_OLD_REV:-main} old_root="" old_build=$build-old
  local cn="$collnet_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
  echo "# $(date -u +%FT%TZ) $(hostname): ring vs CollNet (old: $rev) vs CollNet (this tree), $n ranks"
  if [[ -n ${E2E_COLLNET_OLD_SRC:-} ]]; then
    old_root=$(cd "$E2E_COLLNET_OLD_SRC" && pwd)
    echo "# old = the tree in $old_root, built in $old_build"
  elif git -C "$root" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1; then
    old_root=$old_build/src
    rm -rf "$old_root"
    mkdir -p "$old_root"
    git -C "$root" archive "$rev" | tar -x -C "$old_root"
    echo "# old = $rev ($(git -C "$root" rev-parse --short "$rev")), built in $old_build"
    echo "# new = this tree ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), $(git -C "$root" status --porcelain | wc -l) files changed)"
  else
    echo "# no git rev $rev here (no .git?): old = this tree with STRAND_COLLNET_DIRECT=0 (every byte staged)"
  fi
  for ((round = 1; round <= ${E2E_ROUNDS:-2}; round++)); do
    echo "## round $round: ring"
    E2E_SIZES=$sizes NRANKS=$n "$root/tests/e2e/run_e2e.sh" sweep "NCCL_ALGO=allreduce:Ring" || rc=1
    echo "## round $round: CollNet old"
    if [[ -n $old_root ]]; then
      E2E_BUILD=$old_build/build E2E_SIZES=$sizes NRANKS=$n "$old_root/tests/e2e/run_e2e.sh" sweep "$cn" || rc=1
      grep -h 'closing:' "$old_build"/build/log.sweep.rank* | sed 's/.*collnet_stub: /# old: /' || true
    else
      E2E_SIZES=$sizes NRANKS=$n "$root/tests/e2e/run_e2e.sh" sweep "$cn STRAND_COLLNET_DIRECT=0" || rc=1
      grep -h 'closing:' "$build"/log.sweep.rank* | sed 's/.*collnet_stub: /# old: /' || true
    fi
    echo "## round $round: CollNet new"
    E2E_SIZES=$sizes NRANKS=$n "$root/tests/e2e/run_e2e.sh" sweep "$cn" || rc=1
    grep -h 'closing:' "$build"/log.sweep.rank* | sed 's/.*collnet_stub: /# new: /' || true
    if [[ -n ${E2E_COLLNET_VARIANT:-} ]]; then
      local vb=$build-variant
      if [[ ! -f $vb/build.ninja ]]; then
        mkdir -p "$vb"
        local meson=(meson)
        command -v meson >/dev/null 2>&1 || meson=(python3 -m mesonbuild.mesonmain)
        "${meson[@]}" setup "$vb" "$root" -Dtests=false -Dbuildtype=release \
          "-Dc_args=$E2E_COLLNET_VARIANT" >"$vb/meson-setup.log" 2>&1 || { cat "$vb/meson-setup.log"; rc=1; }
      fi
      echo "## round $round: CollNet new, built with $E2E_COLLNET_VARIANT"
      E2E_BUILD=$vb E2E_SIZES=$sizes NRANKS=$n "$root/tests/e2e/run_e2e.sh" sweep "$cn" || rc=1
      grep -h 'closing:' "$vb"/log.sweep.rank* | sed 's/.*collnet_stub: /# variant: /' || true
    fi
    echo "# $((SECONDS - t0)) s so far"
  done
  if ((SECONDS - t0 < ${E2E_BUDGET_S:-200})); then
    echo "## correctness: every all-reduce result checked with CollNetChain forced, $n ranks"
    # shellcheck disable=SC2086
    env $collnet_env E2E_REF_ENV="NCCL_COLLNET_ENABLE=0 NCCL_ALGO=allreduce:Ring" NRANKS="$n" \
      "$root/tests/e2e/run_e2e.sh" check || rc=1
  else
    echo "# correctness check skipped: $((SECONDS - t0)) s spent (E2E_BUDGET_S)"
  fi
  echo "# $((SECONDS - t0)) s in all, exit $rc"
  return $rc
}

# The `variants` mode (see the top): several configurations, same sizes, closing lines after each.
variants() {
  local t0=$SECONDS rc=0 n=${NRANKS:-2} sizes=${E2E_SIZES:-32K,16M,128M,1G}
  local cn="$collnet_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
  echo "# $(date -u +%FT%TZ) $(hostname): all-reduce, $n ranks, $# configurations, ${E2E_ROUNDS:-1} rounds"
  for ((round = 1; round <= ${E2E_ROUNDS:-1}; round++)); do
    for conf in "$@"; do
      if ((SECONDS - t0 > ${E2E_BUDGET_S:-150})); then
        echo "# budget of ${E2E_BUDGET_S:-150} s spent: '$conf' of round $round and later not run"
        return $rc
      fi
      local envs=${conf//@CN@/$cn}
      echo "## round $round, $n ranks: $conf"
      E2E_SIZES=$sizes NRANKS=$n "$root/tests/e2e/run_e2e.sh" sweep "$envs" || rc=1
      grep -h 'closing:' "$build"/log.sweep.rank* | sed 's/.*collnet_stub: /# closing: /' || true
      # strand-socket's per-connection close line (eager messages, CTSs written), rank 0's first few
      [[ $conf == *@CN@* ]] && { grep -h 'receive connection with.*closed: [0-9]* eager' "$build"/log.sweep.rank0 | head -2 \
        | sed 's/.*receive connection with/# rank 0 net: receive connection with/' || true; }
    done
    echo "# $((SECONDS - t0)) s so far"
  done
  return $rc
}

if [[ $mode == variants ]]; then
  shift
  variants "$@" || exit 1
  exit 0
fi
if [[ $mode == copies ]]; then
  copies || exit 1
  exit 0
fi
for nodes in ${E2E_COLLNET_NODES:-2 4}; do
  case "$mode" in
    check)
      echo "# $(date -u +%FT%TZ) $(hostname): CollNet through strand-socket, $nodes fake nodes"
      # shellcheck disable=SC2086
      # The built-in Socket reference run has no CollNet: it runs all-reduce as Ring.
      if ! env $collnet_env E2E_REF_ENV="NCCL_COLLNET_ENABLE=0 NCCL_ALGO=allreduce:Ring" \
          NRANKS="$nodes" "$root/tests/e2e/run_e2e.sh" check; then
        echo "FAIL: the check suite with CollNetChain forced for all-reduce failed ($nodes nodes)"
        fail=1
      fi
      grep -hE 'collnet_stub|Collnet|CollNet' "$build/log.strand-check.rank0" | head -8 || true
      E2E_SIZES=1M,16M NRANKS="$nodes" "$root/tests/e2e/run_e2e.sh" sweep \
        "$collnet_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING,COLL" || fail=1
      log=$build/log.sweep.rank0
      echo "# lines showing CollNet set up and chosen ($nodes nodes, $log):"
      grep -hE 'collnet_stub|coll=1|Collnet|CollNet' "$log" | grep -v 'NCCL_ALGO' | head -20 || true
      if grep -qE 'Cannot initialize CollNet|Could not find (any local path|NET with id)' "$log"; then
        echo "FAIL: NCCL did not set CollNet up ($nodes nodes):"
        grep -hE 'Cannot initialize CollNet|Could not find' "$log" | head -5
        fail=1
      fi
      # CollNetChain is NCCL's algorithm 3 (ncclAlgo: Tree 0, Ring 1, CollNetDirect 2, CollNetChain 3).
      if ! grep -qE 'CollNetChain|CollNet ?Chain|[Aa]lgo(rithm)?[ =:]*3[^0-9]' "$log"; then
        echo "FAIL: no TUNING/COLL line names the CollNetChain algorithm ($nodes nodes)"
        fail=1
      fi
      ;;
    bench)
      echo "# $(date -u +%FT%TZ) $(hostname): ring vs CollNet all-reduce, $nodes fake nodes"
      E2E_SIZES=${E2E_SIZES:-8,64,512,4K,32K,256K,2M,16M,128M,1G} NRANKS="$nodes" \
        "$root/tests/e2e/run_e2e.sh" sweep "NCCL_ALGO=allreduce:Ring" "$collnet_env" || fail=1
      ;;
    *)
      echo "usage: $0 check|bench|copies|variants" >&2
      exit 2
      ;;
  esac
done
exit $fail
