#!/usr/bin/env bash
# The long run of the seeded differential stress test (tests/dpdk/stress, docs/stress.md): build if needed,
# run random job shapes and hostile schedules against a real engine for N minutes, print the summary.
# Usage: tools/stress.sh --minutes N [--seed S]. Exit status 0 only if every result was right.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

minutes=""
seed=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=(--seed "$2"); shift 2 ;;
    *) echo "usage: tools/stress.sh --minutes N [--seed S]" >&2; exit 2 ;;
  esac
done
if [[ ! $minutes =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "usage: tools/stress.sh --minutes N [--seed S]" >&2
  exit 2
fi

"$root/tools/build.sh" build >/dev/null
seconds=$(awk -v m="$minutes" 'BEGIN { print m * 60 }')
# --seconds is the run's length here, whatever PHUB_STRESS_SECONDS says. Each epoch's net_ring ports say
# that they cannot set an MTU: not news.
env -u PHUB_STRESS_SECONDS "$root/build/tests/dpdk/stress/test-dpdk-stress" --seconds "$seconds" "${seed[@]}" \
  --gtest_brief=1 2> >(grep -v 'cannot set MTU' >&2)
