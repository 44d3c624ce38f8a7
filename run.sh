#!/usr/bin/env bash
# Strand's main command: installs what is missing (Debian, as root), builds in build/, then runs
# strand-conform against every reference plugin built on this machine: a compact table per run
# (failures and skips; what a plugin logs during a check stays with that check, in its JSON
# result), then ONE verdict table across plugins. Exit status: non-zero iff a row of it failed.
#
#   ./run.sh                    install + build + conformance run of every plugin
#   ./run.sh --build-only       install + build (test.sh uses this)
#   ./run.sh --summary FILE...  only the verdict table of strand-conform --json results
#
# Environment: STRAND_BUILD_DIR (default build), STRAND_CONFORM_ARGS (extra strand-conform flags).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

BUILD_DIR=${STRAND_BUILD_DIR:-build}
# Debian packages the build and the tests need. Optional parts (libfabric, verbs headers) are
# listed too: on a machine where they cannot be installed, meson skips those parts and says so.
# debhelper, dpkg-dev and lintian: the Debian package build test (tests/packaging/debian_packages.sh).
# ibverbs-utils: rdma-core's ibv_devices/ibv_devinfo/ibv_rc_pingpong, run unmodified over
# tests/softverbs by its ibverbs-utils and two-namespaces tests.
PACKAGES=(gcc pkg-config meson ninja-build python3 libcmocka-dev libfabric-dev libfabric-bin
          libibverbs-dev ibverbs-utils iproute2 binutils procps debhelper dpkg-dev lintian)

ensure_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: missing Debian packages. Install them as root with:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "run.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  local out
  if [ -f "$BUILD_DIR/build.ninja" ]; then
    out=$(meson setup --reconfigure "$BUILD_DIR" 2>&1) || { echo "$out"; exit 1; }
  else
    out=$(meson setup "$BUILD_DIR" 2>&1) || { echo "$out"; exit 1; }
  fi
  # Optional parts whose dependency is missing say so in one line each ("... skipped: install X").
  echo "$out" | sed -n 's/^Message: \(.*skipped.*\)$/run.sh: \1/p'
  ninja -C "$BUILD_DIR" >/dev/null
  echo "run.sh: built in $BUILD_DIR/"
}

# The verdict table across runs, from strand-conform --json files: one row per plugin x
# provider/device x ABI with its counts and a verdict word, then a total line. A file that is
# missing or unreadable (the run broke before writing it) is a failed row named after the file.
# Returns 1 iff a row failed.
summary() {
  python3 - "$@" <<'EOF'
import json, os, sys

rows = []  # plugin, provider/device, abi, passed, failed, skipped, verdict, note
for path in sys.argv[1:]:
    label = os.path.basename(path)
    label = label[:-5] if label.endswith(".json") else label
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        rows.append([label, "-", "-", 0, 0, 0, "FAIL", "no result (%s)" % e.__class__.__name__])
        continue
    name = d.get("plugin_name") or label
    env = d.get("env") or {}
    where = (env.get("FI_PROVIDER") or env.get("NCCL_SOCKET_IFNAME") or env.get("NCCL_IB_HCA")
             or "default")
    counts = {}
    for c in d.get("checks", []):
        n = counts.setdefault(c.get("abi", 0), [0, 0, 0])
        n[{"PASS": 0, "FAIL": 1}.get(c.get("status"), 2)] += 1
    fatal = d.get("fatal") or ""
    unloaded = str(d.get("plugin", "")).startswith("plugin did not load")
    for abi in sorted(counts or {0: None}, reverse=True):
        p, f, s = counts.get(abi, [0, 0, 0])
        verdict = "FAIL" if f or fatal or unloaded else "PASS" if p else "SKIP"
        note = "run stopped: " + fatal if fatal else "did not load" if unloaded else ""
        rows.append([name, where, "v%d" % abi if abi else "-", p, f, s, verdict, note])

failed = sum(r[6] == "FAIL" for r in rows)
total = ["total", "%d row%s" % (len(rows), "" if len(rows) == 1 else "s"), "",
         sum(r[3] for r in rows), sum(r[4] for r in rows), sum(r[5] for r in rows),
         "FAIL" if failed else "PASS" if rows else "NONE",
         "%d of %d rows failed" % (failed, len(rows)) if failed else ""]
head = ["plugin", "provider/device", "ABI", "passed", "failed", "skipped", "verdict", ""]
w = [max(len(str(r[i])) for r in rows + [head, total]) for i in range(7)]
def line(r):
    cells = [str(r[0]).ljust(w[0]), str(r[1]).ljust(w[1]), str(r[2]).ljust(w[2]),
             str(r[3]).rjust(w[3]), str(r[4]).rjust(w[4]), str(r[5]).rjust(w[5]), r[6]]
    return ("  ".join(cells) + ("  " + r[7] if r[7] else "")).rstrip()
print("=== verdict across plugins ===")
print(line(head))
for r in rows:
    print(line(r))
print(line(total))
sys.exit(1 if failed else 0)
EOF
}

# One strand-conform run per reference plugin (and per fabric for net_ofi), each printing a compact
# table and writing a --json result; then the verdict table across them. Returns non-zero when any
# row of that table failed.
conform_all() {
  local conform="$BUILD_DIR/tests/conform/strand-conform" ran=0
  if [ ! -x "$conform" ]; then
    echo "run.sh: strand-conform was not built" >&2
    return 1
  fi
  local plugin label jsons=()
  RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/strand-run.XXXXXX")
  trap 'rm -rf "$RESULTS"' EXIT
  for plugin in "$BUILD_DIR"/net_*/libnccl-net-strand-*.so; do
    [ -e "$plugin" ] || continue
    label=$(basename "$plugin" .so)
    label=${label#libnccl-net-}
    case "$plugin" in
      *strand-ofi.so)
        for prov in "tcp;ofi_rxm" "sockets"; do
          echo; echo "=== $label FI_PROVIDER=$prov ==="
          local extra=()
          if [ "$prov" = sockets ]; then
            # A defect of libfabric's sockets provider, not of the plugin (docs/plugins/ofi.md,
            # "Hostile traffic and misuse"): junk from strangers wedges the provider itself.
            extra=(--skip hostile.stranger-on-listen-port)
            echo "(hostile.stranger-on-listen-port left out: known sockets-provider defect)"
          fi
          jsons+=("$RESULTS/$(printf %02d $ran)-$label-${prov//[^A-Za-z0-9_]/_}.json")
          FI_PROVIDER="$prov" "$conform" --compact --json "${jsons[-1]}" "${extra[@]}" \
            ${STRAND_CONFORM_ARGS:-} "$plugin" || true
          ran=$((ran + 1))
        done ;;
      *strand-ib.so)
        # No RDMA device here: strand-ib runs over tests/softverbs, a user-space libibverbs.so.1
        # picked by LD_LIBRARY_PATH (two devices, so NIC fusion is checked too). Without the
        # stand-in the plugin finds no device and its row says SKIP.
        local sv="$BUILD_DIR/tests/softverbs"
        echo; echo "=== $label on softverbs ($sv) ==="
        jsons+=("$RESULTS/$(printf %02d $ran)-$label-softverbs.json")
        LD_LIBRARY_PATH="$sv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SOFTVERBS_NDEVS=2 \
          STRAND_IB_CONNECT_TIMEOUT_MS=3000 NCCL_IB_HCA=sv \
          "$conform" --compact --json "${jsons[-1]}" ${STRAND_CONFORM_ARGS:-} "$plugin" || true
        ran=$((ran + 1)) ;;
      *)
        echo; echo "=== $label ==="
        jsons+=("$RESULTS/$(printf %02d $ran)-$label.json")
        "$conform" --compact --json "${jsons[-1]}" ${STRAND_CONFORM_ARGS:-} "$plugin" || true
        ran=$((ran + 1)) ;;
    esac
  done
  if [ "$ran" -eq 0 ]; then
    echo "run.sh: no reference plugin was built" >&2
    return 1
  fi
  echo
  summary "${jsons[@]}"
}

if [ "${1:-}" = "--summary" ]; then
  shift
  summary "$@"
  exit $?
fi
ensure_packages
build
[ "${1:-}" = "--build-only" ] && exit 0
conform_all
