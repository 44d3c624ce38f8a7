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
      echo "usage: $0 check|bench" >&2
      exit 2
      ;;
  esac
done
exit $fail
