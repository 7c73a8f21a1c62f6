#!/usr/bin/env bash
# Builds promtool from the Prometheus Go module (like hack/control-plane builds kube-apiserver) and caches it
# outside the repo, keyed by the pinned version and this module's content. Prints the binary's path last.
# Built with -tags remove_all_sd: `promtool test rules` needs no service discovery, and some discovery
# plugins' modules (e.g. hashicorp/nomad/api) are not served by the Go module proxy.
#
#   BYOK_CACHE_DIR=dir   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[promtool] %s\n' "$*" >&2; }

version="$(awk '$1=="require" && $2=="github.com/prometheus/prometheus" {print $3; exit} $1=="github.com/prometheus/prometheus" {print $2; exit}' "$here/go.mod")"
recipe=1 # bump when the build flags below change
content_hash="$( (echo "$recipe"; cat "$here/go.mod" "$here/go.sum" 2>/dev/null) | sha256sum | cut -c1-12)"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
out="$cache_root/promtool/prometheus-$version-$content_hash"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out/promtool"
  echo "$out/promtool"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build promtool (https://go.dev/doc/install)"; exit 1; }
mkdir -p "$out"
# Prometheus v3.x is module v0.3xx.y: v0.316.0 is Prometheus 3.16.0.
minor="${version#v0.}"; minor="${minor%%.*}"; patch="${version##*.}"
prom_version="3.$((minor - 300)).$patch"
started=$SECONDS
log "building promtool $prom_version ($version) with $(go env GOVERSION) (a few minutes on a small machine)..."
(cd "$here" && CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath" go build -p "$(nproc)" -tags remove_all_sd \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_version" \
  -o "$out/promtool" github.com/prometheus/prometheus/cmd/promtool)
"$out/promtool" --version >&2
touch "$out/.complete"
log "built in $((SECONDS - started))s"
echo "$out/promtool"
