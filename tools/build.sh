#!/usr/bin/env bash
# Configure (once) and build phub. Usage: tools/build.sh [BUILD_DIR] [extra meson options...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-build}
shift || true
[[ $dir = /* ]] || dir="$root/$dir"

if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" "$root" "$@"
fi
ninja -C "$dir"
