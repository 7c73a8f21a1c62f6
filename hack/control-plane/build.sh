#!/usr/bin/env bash
# Builds kube-apiserver, kubectl, etcd and helm from their Go modules (no Docker, no binary downloads)
# and caches them outside the repo, keyed by the pinned versions and the wrapper module's content.
# One `go build` of one module (go.mod here): the packages the four share compile once.
# Prints the directory holding the binaries as its last line of stdout.
#
#   KUBEBUILDER_ASSETS=dir   use existing envtest binaries (kube-apiserver, etcd; kubectl if present)
#   BYOK_CACHE_DIR=dir       cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[control-plane] %s\n' "$*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
  log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

version_of() { awk -v m="$1" '$1==m {print $2; exit} $1=="require" && $2==m {print $3; exit}' "$here/go.mod"; }
k8s_version="$(version_of k8s.io/kubernetes)"
etcd_version="$(version_of go.etcd.io/etcd/server/v3)"
helm_version="$(version_of helm.sh/helm/v3)"
go_version="$(go env GOVERSION)"
recipe=2 # bump when the build flags below change
content_hash="$( (echo "$recipe"; cat "$here/go.mod" "$here/go.sum") | sha256sum | cut -c1-12)"

source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
out="$cache_root/control-plane/k8s-$k8s_version-etcd-$etcd_version-helm-$helm_version-$content_hash"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build the control plane (https://go.dev/doc/install)"; exit 1; }
mkdir -p "$out"
# GOGC=400: the compiler collects a quarter as often; memory is not what a 2-core build runs out of.
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath" GOGC="${GOGC:-400}"
started=$SECONDS

commit_of() { (cd "$here" && go mod download -json "$1@$2" 2>/dev/null | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n1) || true; }
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

k8s_commit="$(commit_of k8s.io/kubernetes "$k8s_version")"
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitCommit=${k8s_commit:-unknown} -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
etcd_commit="$(commit_of go.etcd.io/etcd/server/v3 "$etcd_version")"
helm_commit="$(commit_of helm.sh/helm/v3 "$helm_version")"
helm_version_pkg=helm.sh/helm/v3/internal/version

log "go $go_version; kubernetes $k8s_version, etcd $etcd_version, helm $helm_version -> $out"
log "building kube-apiserver, kubectl, etcd and helm (minutes on a small machine)..."
# Link flags per main package (`-ldflags=pattern=flags`): each binary reports its own version. Go names the etcd
# binary after its package path (server/v3 -> server); it is renamed below.
(cd "$here" && go build -p "$(nproc)" -o "$out/" \
  -ldflags="k8s.io/kubernetes/cmd/...=$k8s_ldflags" \
  -ldflags="go.etcd.io/etcd/server/v3=-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:0:7}" \
  -ldflags="helm.sh/helm/v3/cmd/helm=-s -w -X $helm_version_pkg.version=$helm_version -X $helm_version_pkg.gitCommit=${helm_commit:-unknown} -X $helm_version_pkg.gitTreeState=clean" \
  go.etcd.io/etcd/server/v3 helm.sh/helm/v3/cmd/helm k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
mv "$out/server" "$out/etcd"

for bin in etcd kube-apiserver kubectl helm; do
  [[ -x "$out/$bin" ]] || { log "missing $out/$bin after build"; ls -la "$out" >&2; exit 1; }
done
printf '{"kubernetes":"%s","etcd":"%s","helm":"%s","go":"%s","builtAt":"%s","seconds":%d}\n' \
  "$k8s_version" "$etcd_version" "$helm_version" "$go_version" "$build_date" "$((SECONDS - started))" > "$out/versions.json"
touch "$out/.complete"
log "done in $((SECONDS - started))s"
echo "$out"
