# tests/e2e/runs/paired.sh — sourced by the run scripts here (sksmall8.sh and later): the GPU count
# and the paired round loop that sksmall4-7.sh and ops2.sh each wrote out by hand.
#
# Paired rounds: every configuration of a comparison runs inside ONE `run_e2e.sh sweep` per round,
# in an order that rotates by one each round, so that no configuration always runs first (on a
# fresh connection set-up) or last, and ratios are taken within a round before any median
# (paired_table.py). Two launches of one configuration can differ by 2 µs at small sizes; a
# comparison of medians of separate sweeps is then a comparison of launch draws.

# The number of GPUs on this host (0 without nvidia-smi).
gpu_count() { nvidia-smi -L 2>/dev/null | wc -l; }

# A run's first line: GPUs, their model, CPUs, date and the tree's commit.
paired_banner() {
  echo "# $(gpu_count) GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)), $(nproc) CPUs, $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null)"
}

# The configurations most comparisons pair: NCCL's built-in Socket with no NET plugin loaded, and
# strand-ofi over tcp;ofi_rxm (extra variables of a CONFIG string, below).
PAIRED_BUILTIN='NCCL_NET_PLUGIN=none NCCL_NET=Socket'
PAIRED_OFI='NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=tcp;ofi_rxm'

# paired_rounds DIR NRANKS MAX_ROUNDS BUDGET_S CONFIG...
#   One `run_e2e.sh sweep` per round on GPUs 0..NRANKS-1 (PAIRED_LAUNCHER names another launcher
#   taking the configurations as arguments: "tests/e2e/collnet_e2e.sh variants" for CollNet, where
#   @CN@ stands for the CollNet settings), CONFIG strings as extra variables for each launch
#   (E2E_NAME=NAME labels one for paired_table.py; E2E_SIZES, E2E_OP and E2E_BUDGET_S come from
#   the caller's environment), written to DIR/nNRANKS-rROUND.txt. Stops before a round that would
#   not end within BUDGET_S seconds of the first at the rounds' average pace.
paired_rounds() {
  local dir=$1 n=$2 max=$3 budget=$4
  shift 4
  local k=$# t0=$SECONDS r i dev
  local cfgs=("$@")
  dev=$(seq -s, 0 $((n - 1)))
  mkdir -p "$dir"
  for ((r = 1; r <= max; r++)); do
    local rot=()
    for ((i = 0; i < k; i++)); do rot+=("${cfgs[$(((i + r) % k))]}"); done
    # shellcheck disable=SC2086  # the launcher is a command and its mode, split on purpose
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n timeout 170 ${PAIRED_LAUNCHER:-tests/e2e/run_e2e.sh sweep} "${rot[@]}" \
      >"$dir/n$n-r$(printf %02d "$r").txt" 2>&1 || echo "# $n ranks, round $r: a launch failed (see $dir)"
    local el=$((SECONDS - t0))
    echo "# $n ranks: round $r done at ${el} s"
    [[ -n ${PAIRED_EACH_ROUND:-} ]] && eval "$PAIRED_EACH_ROUND" # e.g. a partial table under $OUT
    if ((el + el / r > budget)); then
      echo "# $n ranks: stopping after round $r (budget ${budget} s)"
      break
    fi
  done
}

# paired_begin NAME [MIN_GPUS]
#   The start the ofi scripts share: NVLS off, ratios to the built-in Socket default
#   (PAIRED_REFS=default), B and O set to PAIRED_BUILTIN and PAIRED_OFI, the banner printed, and
#   D=build-e2e/NAME made empty. With MIN_GPUS, a host with fewer GPUs prints so and ends the script.
paired_begin() {
  export NCCL_NVLS_ENABLE=0 PAIRED_REFS=default
  B=$PAIRED_BUILTIN
  O=$PAIRED_OFI
  paired_banner
  if [ -n "${2:-}" ] && [ "$(gpu_count)" -lt "$2" ]; then
    echo "# fewer than $2 GPUs: nothing to do"
    exit 0
  fi
  D=build-e2e/$1
  rm -rf "$D"
  mkdir -p "$D"
}
