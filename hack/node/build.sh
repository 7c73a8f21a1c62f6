#!/usr/bin/env bash
# Builds the node parts of the e2e cluster: kubelet, kube-controller-manager, kube-scheduler and kube-proxy,
# from the same pinned k8s.io/kubernetes module as the control plane (hack/control-plane), cached outside the repo.
# The wrapper module is copied first: -mod=mod may add go.sum lines for these binaries, and the control plane's cache
# key hashes the committed go.sum.
# Prints the directory holding the binaries as its last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../control-plane" && pwd)"
log() { printf '[node] %s\n' "$*" >&2; }
k8s_version="$(awk '$1=="k8s.io/kubernetes" {print $2; exit} $1=="require" && $2=="k8s.io/kubernetes" {print $3; exit}' "$here/go.mod")"
recipe=1
content_hash="$( (echo "$recipe"; cat "$here/go.mod" "$here/go.sum" "$(dirname "${BASH_SOURCE[0]}")/pause/main.go") | sha256sum | cut -c1-12)"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
out="$cache_root/node/k8s-$k8s_version-$content_hash"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is required to build the node parts"; exit 1; }
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/go.mod" "$here/go.sum" "$here/tools.go" "$work/"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath" GOGC="${GOGC:-400}"
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
started=$SECONDS
log "building kubelet, kube-controller-manager, kube-scheduler, kube-proxy $k8s_version (minutes on 2 cores)..."
(cd "$work" && go build -p "$(nproc)" -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy) >&2
(cd "$(dirname "${BASH_SOURCE[0]}")/pause" && go build -ldflags "-s -w" -o "$out/pause" .) >&2
for bin in kubelet kube-controller-manager kube-scheduler kube-proxy pause; do
  [[ -x "$out/$bin" ]] || { log "missing $out/$bin after build"; exit 1; }
done
printf '{"kubernetes":"%s","seconds":%d}\n' "$k8s_version" "$((SECONDS - started))" > "$out/versions.json"
touch "$out/.complete"
log "done in $((SECONDS - started))s"
echo "$out"
