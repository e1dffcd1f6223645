#!/usr/bin/env bash
# Runs the real-PyTorch training test (tests/system/training) several times in a row and counts the passes:
#   tools/repeat-training.sh [--runs N] [--worlds 4] [--steps 300]     (root; builds first if needed)
# Every run starts its own server and namespaces and removes them; a failing run's output is kept in
# /tmp/phub-training-runs/. The last line is "training: P/N runs passed".
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=20 worlds=4 steps=300
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --worlds) worlds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--worlds 2,4] [--steps N]" >&2; exit 2 ;;
  esac
done
[[ $EUID -eq 0 ]] || { echo "repeat-training: must run as root (namespaces, af_packet)" >&2; exit 2; }
"$root/tools/build.sh" build >/dev/null || { echo "repeat-training: build failed" >&2; exit 1; }
out=/tmp/phub-training-runs
mkdir -p "$out"
passed=0
for i in $(seq 1 "$runs"); do
  log="$out/run-$i.log"
  if timeout 900 /usr/bin/python3 "$root/tests/system/training/train_test.py" --build "$root/build" \
      --worlds "$worlds" --steps "$steps" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "run $i: passed: $(grep -E '^training test: .* passed' "$log" | tail -1)"
    rm -f "$log"
  else
    echo "run $i: FAILED (log: $log)"
    grep -E "^FAIL" "$log" | head -5
  fi
done
echo "training: $passed/$runs runs passed"
[[ $passed -eq $runs ]]
