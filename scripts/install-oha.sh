#!/usr/bin/env bash
# Builds oha (the open-loop HTTP load generator bench/peers.ts drives) from the Rust package registry into the tools
# cache, outside the repo: <cache root>/oha/bin/oha (hack/lib/cache.sh). Needs cargo (rustup.rs); takes a few minutes once.
set -euo pipefail
OHA_VERSION=1.16.0
source "$(dirname "${BASH_SOURCE[0]}")/../hack/lib/cache.sh"
root="$cache_root/oha"
if [ -x "$root/bin/oha" ] && "$root/bin/oha" --version | grep -q "$OHA_VERSION"; then exit 0; fi
if ! command -v cargo >/dev/null; then
  echo "install-oha: cargo not found; install Rust (https://rustup.rs) or point OHA=<path to oha> at a build" >&2
  exit 1
fi
mkdir -p "$root"
cargo install oha --version "$OHA_VERSION" --locked --root "$root"
