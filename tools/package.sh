#!/usr/bin/env bash
# Build phub's Debian packages (phub, libphub-client1, libphub-client-dev, python3-phub) with debhelper and
# meson, then run lintian on them. Run as root or not; needs the packages of tools/setup/packages.txt.
#
# Usage: tools/package.sh [--out DIR] [--work DIR] [--no-lintian]
#   --out DIR     where the .deb files (with the -dbgsym ones, .buildinfo and .changes) go (default: WORK/debs)
#   --work DIR    the staging copy of the tree and the meson build directory, kept between runs so that a
#                 second run compiles only what changed (default: build-deb/ in the checkout)
#   --no-lintian  skip lintian (it runs by default; any error tag fails the script)
#
# dpkg-buildpackage wants debian/ at the top of the source tree and writes its results into the directory
# above it. The packaging lives in tools/debian (tools/ holds the project's setup, build and install
# entry points); this script copies the checkout's files (tracked and untracked, not ignored: the working
# tree as git sees it) into WORK/src/phub-VERSION, puts tools/debian there as debian/, and builds there,
# so nothing is written into the checkout or beside it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$root/build-deb
out=
lintian=1
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-lintian) lintian=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "package: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
mkdir -p "$work"
work=$(cd "$work" && pwd)
out=${out:-$work/debs}

# The packages' version is the project's: debian/changelog must name the version meson.build declares.
version=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" "$root/meson.build" | head -n 1)
deb_version=$(dpkg-parsechangelog -l "$root/tools/debian/changelog" -S Version)
if [[ -z $version || $version != "$deb_version" ]]; then
  echo "package: meson.build says version '$version', tools/debian/changelog '$deb_version': make them agree" >&2
  exit 1
fi

# The staging tree: the checkout's files with their modification times, so that the kept build directory
# rebuilds only what changed since the last run. In a git checkout, the files git sees (tracked, or untracked
# and not ignored; safe.directory: the checkout may belong to another user than root); elsewhere (an unpacked
# tarball), every file but the build directories.
stage=$work/src/phub-$version
rm -rf "$work/src"
mkdir -p "$stage"
git=(git -c safe.directory="$root" -C "$root")
if "${git[@]}" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$root" && "${git[@]}" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$stage"
else
  (cd "$root" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$stage"
fi
rm -rf "$stage/debian"
cp -a "$root/tools/debian" "$stage/debian"

echo "package: building phub $version in $stage (meson build directory $work/obj)"
start=$(date +%s)
(
  cd "$stage"
  export PHUB_OBJDIR=$work/obj
  export DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}"
  # -b: binary packages only; -nc: no clean first, which would remove the kept build directory.
  dpkg-buildpackage -b -us -uc -nc
)
echo "package: dpkg-buildpackage took $(($(date +%s) - start)) s"

mkdir -p "$out"
shopt -s nullglob
results=("$work"/src/*.deb "$work"/src/*.buildinfo "$work"/src/*.changes)
((${#results[@]})) || { echo "package: dpkg-buildpackage made no packages" >&2; exit 1; }
mv -f "${results[@]}" "$out"/
rm -rf "$work/src"
echo "package: in $out:"
(cd "$out" && ls -1 ./*.deb)

if ((lintian)); then
  echo "package: lintian"
  # Tags of every severity are shown; an error fails the build (warnings are listed, not fatal).
  lintian --info --display-info --fail-on error "$out"/*.changes
  echo "package: lintian found no errors"
fi
