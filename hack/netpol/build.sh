#!/usr/bin/env bash
# Builds the e2e node's NetworkPolicy enforcer: kube-router (iptables and ipset), run as a network-policy controller
# only (no routing, no service proxy). Built from its Go module at a pinned version and cached outside the repo, like
# the control plane. Prints the directory holding the binary as its last line of stdout.
# kube-network-policies (what kind ships) needs nftables' queue expression, which kernels without CONFIG_NFT_QUEUE lack;
# kube-router filters with iptables' NFLOG/REJECT and ipset matches, which such kernels have.
set -euo pipefail
log() { printf '[netpol] %s\n' "$*" >&2; }
module=github.com/cloudnativelabs/kube-router/v2
version=v2.1.0
recipe=1
content_hash="$( (echo "$recipe $module $version"; cat "${BASH_SOURCE[0]}") | sha256sum | cut -c1-12)"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
out="$cache_root/netpol/kube-router-$version-$content_hash"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is required to build kube-router"; exit 1; }
mkdir -p "$out"
started=$SECONDS
log "building kube-router $version (minutes on 2 cores)..."
CGO_ENABLED=0 GOFLAGS="-trimpath" GOBIN="$out" go install -ldflags "-s -w -X $module/pkg/version.Version=$version" "$module/cmd/kube-router@$version" >&2
[[ -x "$out/kube-router" ]] || { log "missing $out/kube-router after build"; exit 1; }
printf '{"kube-router":"%s","seconds":%d}\n' "$version" "$((SECONDS - started))" > "$out/versions.json"
touch "$out/.complete"
log "done in $((SECONDS - started))s"
echo "$out"
