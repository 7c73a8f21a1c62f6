#!/usr/bin/env bash
# Builds kube-apiserver, kubectl, etcd and helm from their Go modules (no Docker, no binary downloads)
# and caches them outside the repo, keyed by the pinned versions and the wrapper modules' content.
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

version_of() { awk -v m="$2" '$1==m {print $2; exit} $1=="require" && $2==m {print $3; exit}' "$here/$1/go.mod"; }
k8s_version="$(version_of kube k8s.io/kubernetes)"
etcd_version="$(version_of etcd go.etcd.io/etcd/server/v3)"
helm_version="$(version_of helm helm.sh/helm/v3)"
go_version="$(go env GOVERSION)"
recipe=1 # bump when the build flags below change (not for build order: the binaries are the same)
content_hash="$( (echo "$recipe"; cat "$here"/*/go.mod "$here"/*/go.sum) | sha256sum | cut -c1-12)"

cache_root="${BYOK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator}"
out="$cache_root/control-plane/k8s-$k8s_version-etcd-$etcd_version-helm-$helm_version-$content_hash"
if [[ -f "$out/.complete" ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build the control plane (https://go.dev/doc/install)"; exit 1; }
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath"
started=$SECONDS

commit_of() { (cd "$here/$1" && go mod download -json "$2@$3" 2>/dev/null | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n1) || true; }
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

build() { # dir, ldflags, packages...
  local dir="$1" ldflags="$2"; shift 2
  log "building $* (this takes minutes on a small machine)..."
  local t=$SECONDS
  (cd "$here/$dir" && go build -p "$(nproc)" -ldflags "$ldflags" -o "$out/" "$@")
  log "built $* in $((SECONDS - t))s"
}

k8s_commit="$(commit_of kube k8s.io/kubernetes "$k8s_version")"
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitCommit=${k8s_commit:-unknown} -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
etcd_commit="$(commit_of etcd go.etcd.io/etcd/server/v3 "$etcd_version")"
helm_commit="$(commit_of helm helm.sh/helm/v3 "$helm_version")"

log "go $go_version; kubernetes $k8s_version, etcd $etcd_version, helm $helm_version -> $out"
# The three modules build side by side: each build has serial stretches (module downloads, the final links) that
# the others' compiles fill. etcd writes its binary under a temporary name so the kube build's output cannot clash.
etcd_out="$(mktemp -d "$out/.etcd-XXXX")"
( out="$etcd_out" build etcd "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:0:7}" go.etcd.io/etcd/server/v3 \
  && mv "$etcd_out"/* "$out/etcd" && rmdir "$etcd_out" ) & etcd_pid=$!
( build helm "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitCommit=${helm_commit:-unknown} -X helm.sh/helm/v3/internal/version.gitTreeState=clean" helm.sh/helm/v3/cmd/helm ) & helm_pid=$!
build kube "$k8s_ldflags" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
wait "$etcd_pid" || { log "etcd build failed"; exit 1; }
wait "$helm_pid" || { log "helm build failed"; exit 1; }

for bin in etcd kube-apiserver kubectl helm; do
  [[ -x "$out/$bin" ]] || { log "missing $out/$bin after build"; ls -la "$out" >&2; exit 1; }
done
printf '{"kubernetes":"%s","etcd":"%s","helm":"%s","go":"%s","builtAt":"%s","seconds":%d}\n' \
  "$k8s_version" "$etcd_version" "$helm_version" "$go_version" "$build_date" "$((SECONDS - started))" > "$out/versions.json"
touch "$out/.complete"
log "done in $((SECONDS - started))s"
echo "$out"
