# shellcheck shell=bash disable=SC2154  # sourced by run_e2e.sh, which sets the variables
# tests/e2e/nccl_tests.sh — `run_e2e.sh nccl-tests`: NVIDIA's nccl-tests through the built-in Socket
# and every Strand plugin built here, one comparison table. Sourced by run_e2e.sh after it has built
# the plugins and found NCCL and CUDA (nccl_inc, nccl_lib, nccl_so, cuda, build, plugin_dirs,
# nranks, ngpu, have_ofi, strand_env, ofi_env, builtin_env are set; MPS runs on a one-GPU machine).
#
# Source: NCCL_TESTS_SRC (a checkout of github.com/NVIDIA/nccl-tests), default
# .e2e-carry-nccl-tests/ (tests/e2e/carry_nccl_tests.sh copies a checkout there so that it travels
# to a machine without internet). Built once per mode into $build/nccl-tests/, with nvcc for the
# GPU's own compute capability, against run_e2e.sh's NCCL (a libnccl.so link is made beside the
# wheel's libnccl.so.2).
#
# Modes (NCCL_TESTS_MODE):
#   procs  (default) one process per rank, one GPU per rank (all ranks on GPU 0 under MPS with one
#          GPU), each with its own NCCL_HOSTID: NCCL sees NRANKS nodes and every byte crosses the
#          network plugin. nccl-tests is built with MPI=1 against tests/e2e/mini_mpi (a one-host
#          stand-in for the few MPI calls it makes), so no MPI is needed.
#   single nccl-tests' own launcher without MPI: one process drives all GPUs (-g NGPU, needs 2+),
#          with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so that NCCL connects the GPUs through the
#          network; NCCL sees one node.
# Variables: NT_OPS (default "all_reduce all_gather reduce_scatter alltoall sendrecv"), NT_MINBYTES
# (8), NT_MAXBYTES (128M), NT_STEP (factor, 8), NT_ITERS (20), NT_WARMUP (5), NT_CONFIGS (names to
# run, default all available: builtin strand-socket strand-ofi strand-ib).
# strand-ib runs over tests/softverbs when .e2e-carry-softverbs/ exists (carry_softverbs.sh) or
# E2E_SOFTVERBS_DIR names a directory holding softverbs' libibverbs.so.1; otherwise it is left out
# with one line saying so.

nt_src=${NCCL_TESTS_SRC:-$root/.e2e-carry-nccl-tests}
if [[ ! -f $nt_src/src/common.cu ]]; then
  echo "nccl-tests source not found at $nt_src: set NCCL_TESTS_SRC to a checkout of" \
       "github.com/NVIDIA/nccl-tests, or run tests/e2e/carry_nccl_tests.sh where one is and carry" \
       ".e2e-carry-nccl-tests (tests/e2e/README.md)" >&2
  exit 1
fi
nt_version=$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$nt_src/src/common.h")
nt_mode=${NCCL_TESTS_MODE:-procs}
case $nt_mode in
  procs) ;;
  single) (( ngpu >= 2 )) || { echo "NCCL_TESTS_MODE=single needs 2+ GPUs (this machine has $ngpu)" >&2; exit 1; } ;;
  *) echo "NCCL_TESTS_MODE is procs or single, not $nt_mode" >&2; exit 2 ;;
esac
nt=$build/nccl-tests
mkdir -p "$nt/nccl-home/lib" "$nt/mini-mpi/lib"
# NCCL as nccl-tests' Makefile wants it: NCCL_HOME/include and NCCL_HOME/lib/libnccl.so.
ln -sfn "$nccl_inc" "$nt/nccl-home/include"
ln -sf "$nccl_so" "$nt/nccl-home/lib/libnccl.so"
ln -sf "$nccl_so" "$nt/nccl-home/lib/libnccl.so.2"
ln -sfn "$root/tests/e2e/mini_mpi" "$nt/mini-mpi/include"
$CC -std=c11 -O2 -Wall -Wextra -shared -fPIC -I"$root/tests/e2e/mini_mpi" \
  "$root/tests/e2e/mini_mpi/mini_mpi.c" -o "$nt/mini-mpi/lib/libmpi.so"
cc_cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
gencode="-gencode=arch=compute_$cc_cap,code=sm_$cc_cap"
nt_bin=$nt/build-$nt_mode
mpi_flag=0; [[ $nt_mode == procs ]] && mpi_flag=1
echo "# nccl-tests $nt_version from $nt_src: building ($nt_mode mode, MPI=$mpi_flag, sm_$cc_cap) into $nt_bin"
if ! make -C "$nt_src" -j"$(nproc)" MPI=$mpi_flag MPI_HOME="$nt/mini-mpi" NCCL_HOME="$nt/nccl-home" \
    CUDA_HOME="$cuda" NVCC_GENCODE="$gencode" BUILDDIR="$nt_bin" >"$nt/make-$nt_mode.log" 2>&1; then
  tail -30 "$nt/make-$nt_mode.log" >&2
  exit 1
fi

# Configurations: name|variables|extra library path.
sv_dir=${E2E_SOFTVERBS_DIR:-$root/.e2e-carry-softverbs}
nt_configs=("builtin|$builtin_env|" "strand-socket|NCCL_NET_PLUGIN=strand-socket|")
(( have_ofi )) && nt_configs+=("strand-ofi|NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=tcp;ofi_rxm|")
ib_plugin_dir=""
if [[ -f $build/net_ib/libnccl-net-strand-ib.so ]]; then ib_plugin_dir=$build/net_ib
elif [[ -f $sv_dir/libnccl-net-strand-ib.so ]]; then ib_plugin_dir=$sv_dir; fi
if [[ -e $sv_dir/libibverbs.so.1 && -n $ib_plugin_dir ]]; then
  nt_configs+=("strand-ib|NCCL_NET_PLUGIN=strand-ib NCCL_IB_HCA=sv SOFTVERBS_NDEVS=1|$sv_dir:$ib_plugin_dir")
else
  echo "# strand-ib left out: no softverbs libibverbs.so.1 in $sv_dir (tests/e2e/carry_softverbs.sh)"
fi
(( have_ofi )) || echo "# strand-ofi left out: not built (no libfabric: tests/e2e/carry_libfabric.sh)"
read -r -a nt_ops <<<"${NT_OPS:-all_reduce all_gather reduce_scatter alltoall sendrecv}"
nt_args=(-b "${NT_MINBYTES:-8}" -e "${NT_MAXBYTES:-128M}" -f "${NT_STEP:-8}" -n "${NT_ITERS:-20}"
         -w "${NT_WARMUP:-5}" -c 1)
nt_base_ld=$nt/mini-mpi/lib:$nt/nccl-home/lib:$plugin_dirs:$build/net_ib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ $nt_mode == procs ]]; then
  nt_desc="one process per rank, $nranks ranks, each its own NCCL_HOSTID (NCCL sees $nranks nodes)"
  (( ngpu == 1 )) && nt_desc="$nt_desc, all on GPU 0 under CUDA MPS"
else
  nt_desc="nccl-tests' own launcher: one process, -g $ngpu, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (NCCL sees 1 node)"
fi
echo "# $(date -u +%FT%TZ) $(hostname): nccl-tests $nt_version, $nt_desc"

# nt_run CONFIG OP: rank 0's output in $nt/log.CONFIG.OP (other ranks: .rankR).
nt_run() {
  local name=$1 envs=$2 ld=$3 op=$4 log=$nt/log.$1.$4
  local exe=$nt_bin/${op}_perf
  if [[ $nt_mode == single ]]; then
    env $envs NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 LD_LIBRARY_PATH="${ld:+$ld:}$nt_base_ld" \
      timeout 600 "$exe" "${nt_args[@]}" -g "$ngpu" >"$log" 2>&1
    return
  fi
  # the port: below the ephemeral range (32768+), where no connection's local port can hold it
  local port=$(( 20000 + RANDOM % 12000 )) pids=() rc=0 dev=()
  for ((r = nranks - 1; r >= 0; r--)); do
    dev=(); (( ngpu == 1 )) && dev=(NCCL_TESTS_DEVICE=0)
    local out=$log; (( r )) && out=$log.rank$r
    env $envs "${dev[@]}" NCCL_HOSTID="strand-nt-node-$r" MINI_MPI_RANK=$r MINI_MPI_SIZE="$nranks" \
      MINI_MPI_PORT=$port LD_LIBRARY_PATH="${ld:+$ld:}$nt_base_ld" \
      timeout 600 "$exe" "${nt_args[@]}" -g 1 >"$out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

nt_logs=()
for cfg in "${nt_configs[@]}"; do
  IFS='|' read -r name envs ld <<<"$cfg"
  if [[ -n ${NT_CONFIGS:-} && " $NT_CONFIGS " != *" $name "* ]]; then continue; fi
  for op in "${nt_ops[@]}"; do
    if nt_run "$name" "$envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" "$ld" "$op"; then
      echo "# $name $op: done"
    else
      echo "# $name $op: FAILED (exit status non-zero; see $nt/log.$name.$op*)"
    fi
    # The line that proves which network NCCL used.
    grep -hm1 -E 'NCCL INFO Using network|NET/Plugin: Loaded|Using network' "$nt/log.$name.$op" \
      | sed "s/^/#   /" || true
    nt_logs+=("$name|$op|$nt/log.$name.$op")
  done
done

python3 "$root/tests/e2e/nccl_tests_table.py" "$nt_version" "$nt_desc" "${nt_logs[@]}"
