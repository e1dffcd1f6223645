#!/usr/bin/env bash
# Configure (once) and build phub. Usage: tools/build.sh [BUILD_DIR] [extra meson options...]
# With PHUB_BUILD_WITHOUT_SUITES="SUITE..." (e.g. "unit dpdk"), every target but the test binaries that only
# those suites run (tools/test/targets_without.py; tools/test.sh's release tree).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-build}
shift || true
[[ $dir = /* ]] || dir="$root/$dir"

if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" "$root" "$@"
fi
if [[ -n ${PHUB_BUILD_WITHOUT_SUITES:-} ]]; then
  ninja -C "$dir" build.ninja  # meson's introspection is current only once a changed meson.build is read again
  # shellcheck disable=SC2086  # the suites are words
  mapfile -t targets < <(/usr/bin/python3 "$root/tools/test/targets_without.py" "$dir" $PHUB_BUILD_WITHOUT_SUITES)
  ((${#targets[@]})) || exit 1
  ninja -C "$dir" "${targets[@]}"
else
  ninja -C "$dir"
fi
