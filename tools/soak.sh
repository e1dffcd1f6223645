#!/usr/bin/env bash
# The soak (tests/system/faults/soak.py, docs/client.md "Soak"): build if needed, then for N minutes one real
# phub-server in network namespaces runs mixed verified jobs (allreduce, ps with Adam and momentum,
# deterministic bf16; four tenants) under the fault matrix's faults in rotation and live reloads, and prints
# rounds, wrong results, errors, the memory high-water mark and drift (last line `SOAK ...`).
# Usage: tools/soak.sh --minutes N (root). Exit status 0 only if 0 wrong, no failed check and no leak.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { echo "usage: tools/soak.sh --minutes N" >&2; exit 2; }
minutes=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) [[ $# -ge 2 ]] || usage; minutes=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
if [[ $(id -u) -ne 0 ]]; then
  echo "tools/soak.sh: needs root (network namespaces, af_packet, nftables)" >&2
  exit 2
fi

"$root/tools/build.sh" build >/dev/null
# The run is bounded: its own length plus the last cycle and the clean-up.
limit=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 + 600 }')
exec timeout --signal=TERM --kill-after=60 "$limit" /usr/bin/python3 "$root/tests/system/faults/soak.py" \
  --build "$root/build" --minutes "$minutes"
