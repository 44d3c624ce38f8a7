# tests/e2e/runs/cnhost_rounds.sh — sourced by cnhost1-3.sh: the round loop of host-only CollNet
# measurements (`strand-conform perf --collnet`, no GPU used) on a GPU host's cores.
#
# cnhost_rounds ROUNDS SIZES CONFIG...
#   ROUNDS rounds; in each, every CONFIG (a list of VAR=value settings) once, in the given order,
#   one `perf --collnet` run of the sizes SIZES (--collnet-bytes) for CNH_TIME seconds (default
#   0.5) each; prints the table rows and rank 0's `closing: call gaps:` line per size. BIN names
#   the directory holding strand-conform and libnccl-net-strand-socket.so (default
#   build-hostperf-carry, tests/e2e/runs/README.md says how it is made). A CONFIG that starts with
#   `@SO=PATH ` runs the library PATH instead (to pair two builds in one call); one that starts
#   with `@ARG=OPTION ` adds that perf option (e.g. --collnet-ref-headers). CNH_NRANKS (default 2)
#   runs that many ranks (`--nranks`, 2..8).
cnhost_rounds() {
  local rounds=$1 sizes=$2 r cfg
  shift 2
  local bin=${BIN:-build-hostperf-carry} n=${CNH_NRANKS:-2}
  echo "# $(date -u +%FT%TZ) $(nproc) CPUs $(git rev-parse --short HEAD 2>/dev/null)"
  for ((r = 1; r <= rounds; r++)); do
    for cfg in "$@"; do
      local so=$bin/libnccl-net-strand-socket.so
      local arg=()
      if [[ $cfg == @SO=* ]]; then so=${cfg%% *}; so=${so#@SO=}; cfg=${cfg#* }; fi
      if [[ $cfg == @ARG=* ]]; then arg=("${cfg%% *}"); arg=("${arg[0]#@ARG=}"); cfg=${cfg#* }; fi
      echo "## round $r: ${arg[*]} $cfg ($so)"
      # shellcheck disable=SC2086  # the configuration is a list of assignments
      env $cfg NCCL_DEBUG=INFO timeout 60 "$bin/strand-conform" perf --collnet --only perf.collnet-allreduce -v \
        --nranks "$n" --collnet-bytes "$sizes" "${arg[@]}" --time "${CNH_TIME:-0.5}" "$so" 2>&1 \
        | grep -E "^ +[0-9]+ +[0-9]+ |rank 0/$n closing: call gaps|FAIL" | sed 's/.*closing: call gaps: /  gaps: /' | cut -c1-330
    done
  done
}
