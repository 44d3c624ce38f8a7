# Sourced by tests/e2e/run_e2e.sh and tests/e2e/runs/unpack1.sh: what the device-unpack mode needs
# from NCCL (docs/spec/device-unpack.md §5.5): Simple protocol and Ring only (LL/LL128/PAT/NVLS
# receives are not unpacked and skew the ring), GDR on for the receive FIFO (the virtual NIC has no
# PCI path), sends from host memory, no user-buffer registration (NCCL's guards for UNPACK plugins
# are inactive since 2.24.3). E2E_UNPACK_NCHANNELS: NCCL's channel count (default 16).
# shellcheck shell=bash
unpack_nccl_env="NCCL_PROTO=Simple NCCL_ALGO=Ring NCCL_PAT_ENABLE=0 NCCL_NVLS_ENABLE=0 \
NCCL_COLLNET_ENABLE=0 NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=0 NCCL_LOCAL_REGISTER=0 \
NCCL_GRAPH_REGISTER=0 NCCL_MIN_NCHANNELS=${E2E_UNPACK_NCHANNELS:-16}"
