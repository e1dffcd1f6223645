#!/usr/bin/env bash
# Smoke-run one libFuzzer target: run_fuzz.sh TARGET SEED_DIR WORK_DIR SECONDS.
# New inputs go to WORK_DIR (in the build tree); the seed corpus in the source tree is only read.
set -euo pipefail
target=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work"
exec "$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 -print_final_stats=1 "$work" "$seeds"
