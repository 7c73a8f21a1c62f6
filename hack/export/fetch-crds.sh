#!/usr/bin/env bash
# Fetches the CRDs an export is validated against that live in Go modules: Envoy Gateway's (gateway.envoyproxy.io:
# Backend, BackendTrafficPolicy, ...) and the Gateway API's (HTTPRoute, BackendTLSPolicy), with
# `go mod download -json` from the module proxy, into a cache outside the repo. Envoy AI Gateway's and
# agentgateway's CRDs are not served by any module proxy: fetch-third-party.sh gets them at pinned commits.
# Prints the cache folder last (it holds envoy-gateway/*.yaml and gateway-api/*.yaml).
#
#   BYOK_CACHE_DIR=dir   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
set -euo pipefail

log() { printf '[export-crds] %s\n' "$*" >&2; }
# Envoy Gateway's release and the Gateway API version its go.mod requires (the pair its CRDs are tested with).
envoy_gateway_module=github.com/envoyproxy/gateway
envoy_gateway_version=v1.9.1
gateway_api_module=sigs.k8s.io/gateway-api

source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
out="$cache_root/export-crds/envoy-gateway-$envoy_gateway_version"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is required to fetch the CRDs from the module proxy (https://go.dev/doc/install)"; exit 1; }

# go mod download needs a module context only for its cache; a scratch one keeps the repo untouched.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
download() { (cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$1@$2") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

log "downloading $envoy_gateway_module@$envoy_gateway_version"
eg_dir="$(download "$envoy_gateway_module" "$envoy_gateway_version")"
[[ -d "$eg_dir" ]] || { log "no module folder for $envoy_gateway_module@$envoy_gateway_version"; exit 1; }
gateway_api_version="$(awk -v m="$gateway_api_module" '$1==m {print $2; exit}' "$eg_dir/go.mod")"
[[ -n "$gateway_api_version" ]] || { log "$envoy_gateway_module's go.mod names no $gateway_api_module"; exit 1; }
log "downloading $gateway_api_module@$gateway_api_version (what $envoy_gateway_module@$envoy_gateway_version requires)"
ga_dir="$(download "$gateway_api_module" "$gateway_api_version")"
[[ -d "$ga_dir" ]] || { log "no module folder for $gateway_api_module@$gateway_api_version"; exit 1; }

rm -rf "$out"
mkdir -p "$out/envoy-gateway" "$out/gateway-api"
cp "$eg_dir"/charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_*.yaml "$out/envoy-gateway/"
# The experimental channel: BackendTLSPolicy and the newest HTTPRoute fields are there.
cp "$ga_dir"/config/crd/experimental/gateway.networking.k8s.io_*.yaml "$out/gateway-api/"
chmod -R u+w "$out"
printf '%s %s\n%s %s\n' "$envoy_gateway_module" "$envoy_gateway_version" "$gateway_api_module" "$gateway_api_version" >"$out/VERSIONS"
touch "$out/.complete"
log "fetched into $out"
echo "$out"
