#!/usr/bin/env bash
# Install every Debian 12 package phub needs (tools/setup/packages.txt). Idempotent; run as root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ $EUID -ne 0 ]]; then
  echo "setup: must run as root (apt-get install)" >&2
  exit 1
fi

mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/setup/packages.txt" | grep -v '^$')
missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
else
  echo "setup: all ${#pkgs[@]} packages present"
fi

# Grafana's published dashboard types and the TypeScript compiler, for the dashboard's schema check
# (tests/system/grafana): npm packages pinned by tools/grafana/schema/package-lock.json, installed into
# tools/grafana/schema/node_modules (git-ignored) when missing or older than the lock file.
schema="$here/grafana/schema"
if [[ ! -f $schema/node_modules/.package-lock.json || $schema/package-lock.json -nt $schema/node_modules/.package-lock.json ]]; then
  echo "setup: installing Grafana's schema and TypeScript (npm ci in tools/grafana/schema)"
  if ! command -v npm >/dev/null; then
    echo "setup: npm is missing (this machine's nodejs comes without it: apt-get install npm)" >&2
    exit 1
  fi
  (cd "$schema" && npm ci --no-audit --no-fund)
fi
