#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-29 (session 13), after cnhost11.sh (the stub's exchanges: a sixth to a
# quarter waiting for the last rank's post, the rest a net moving the stub's traffic at about half
# the reference's rate): does the stub's comm layout cost the net that? `strand-conform perf
# --collnet` host only, 1.75 MB calls, NCCL's window of 8, the net reference on one comm pair per
# peer (as before) and with --collnet-ref-streams (the stub's layout: 2 comm pairs per stream and
# peer; 4 streams at 2 ranks, 2 at 4, the stub's auto counts), every configuration once per round.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-3}" 1835008 "X=1" "@ARG=--collnet-ref-streams=4 X=1" "@ARG=--collnet-ref-streams=1 X=1"
CNH_NRANKS=4 cnhost_rounds "${CNH_ROUNDS:-3}" 1835008 "X=1" "@ARG=--collnet-ref-streams=2 X=1"
