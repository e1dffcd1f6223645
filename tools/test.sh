#!/usr/bin/env bash
# The README's test command: install dependencies, build two ways (release with g++; ASan+UBSan with the libFuzzer
# targets, with clang),
# run every suite, and print `N passed, N failed` as the last line. Exit status 0 only if all passed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

logs=()
started=$SECONDS
# Each heading carries the minutes and seconds since the start, so a log shows where the time went.
note() { printf '\n==== [%dm%02ds] %s ====\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

# run_suite BUILD_DIR SUITE LABEL [meson test options...]: runs one suite and records its log.
run_suite() {
  local dir=$1 suite=$2 label=$3
  shift 3
  local log="$dir/meson-logs/$label.json"
  rm -f "$log"
  logs+=("$label=$log")
  note "suite $label"
  meson test -C "$dir" --suite "$suite" --logbase "$label" --print-errorlogs "$@" || true
}

note "setup"
if ! "$root/tools/setup.sh"; then
  echo "test: dependency installation failed"
  echo "0 passed, 1 failed"
  exit 1
fi

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1

# The unit and dpdk suites run once, in the ASan+UBSan tree: the release tree builds everything but their test
# binaries (about half its compile time) and runs the suites that need release speed, and the suite `release`:
# the checks that only a build without sanitizers can make (tests/meson.build). --no-rebuild: meson test would
# otherwise build every target first.
note "build: release (build/), without the unit and dpdk suites' binaries"
if PHUB_BUILD_WITHOUT_SUITES="unit dpdk" "$root/tools/build.sh" build; then
  run_suite build release release --num-processes 1 --no-rebuild
  run_suite build bench bench --num-processes 1 --no-rebuild
  run_suite build system system --num-processes 1 --no-rebuild
else
  logs+=("build=build/meson-logs/missing.json")
fi

# One sanitizer tree serves the unit, dpdk and fuzz suites: clang with ASan+UBSan and the libFuzzer targets
# (clang compiles this tree in about half the time g++ takes; the release tree is g++'s).
note "build: ASan+UBSan with the libFuzzer targets (build-asan-fuzz/, clang)"
if CC=clang CXX=clang++ "$root/tools/build.sh" build-asan-fuzz -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=plain -Doptimization=1 -Dfuzz=true; then
  run_suite build-asan-fuzz unit unit-asan --num-processes 2
  # DPDK's own memory is not instrumented and it keeps allocations until exit: no leak check there.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 run_suite build-asan-fuzz dpdk dpdk-asan --num-processes 1
  run_suite build-asan-fuzz fuzz fuzz
else
  logs+=("build-asan-fuzz=build-asan-fuzz/meson-logs/missing.json")
fi

note "summary"
/usr/bin/python3 "$root/tools/test/summarize.py" "${logs[@]}"
