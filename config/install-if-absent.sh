#!/bin/sh
# meson install script: install-if-absent.sh SRC DEST copies the installed SRC to DEST, both absolute and both
# under DESTDIR, unless DEST exists already (a config the operator may have edited).
set -eu
src=$1 dest=$2
# MESON_INSTALL_DESTDIR_PREFIX is DESTDIR joined with the prefix: what precedes the prefix in it is DESTDIR.
destdir=${MESON_INSTALL_DESTDIR_PREFIX%"$MESON_INSTALL_PREFIX"}
if [ -e "$destdir$dest" ]; then
  echo "Keeping $destdir$dest (the new default is $destdir$src)"
else
  mkdir -p "$(dirname "$destdir$dest")"
  cp "$destdir$src" "$destdir$dest"
  chmod 0644 "$destdir$dest"
  echo "Installing $destdir$src to $destdir$dest"
fi
