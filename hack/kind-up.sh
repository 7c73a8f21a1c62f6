#!/usr/bin/env bash
# For users with Docker: a kind cluster with the operator image loaded and the chart installed.
#   hack/kind-up.sh [cluster-name]
set -euo pipefail
cluster="${1:-byok}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image="byok-operator:dev"
for tool in docker kind helm kubectl; do
  command -v "$tool" >/dev/null || { echo "kind-up: $tool is required" >&2; exit 1; }
done
docker build -t "$image" "$root"
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster"
kind load docker-image "$image" --name "$cluster"
helm upgrade --install byok "$root/charts/byok-operator" --kube-context "kind-$cluster" \
  --namespace byok-system --create-namespace \
  --set image.repository=byok-operator --set image.tag=dev --set image.pullPolicy=Never --wait
kubectl --context "kind-$cluster" apply -f "$root/config/samples/"
echo "Installed. Try: kubectl --context kind-$cluster get byok -A"
