#!/usr/bin/env bash
# Debian packages the e2e node runs (npm run e2e): containerd with runc and the CNI plugins for the kubelet, podman and
# mmdebstrap for the image build (hack/image/build.sh), iproute2 and iptables for the bridge and kube-proxy, ipset for
# kube-router (NetworkPolicy). Installs what is missing with apt-get; a no-op when present. The e2e needs root: it
# makes a bridge, iptables chains and ipsets.
set -euo pipefail
need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v newuidmap >/dev/null 2>&1 || need+=(uidmap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ipset >/dev/null 2>&1 || need+=(ipset)
[[ $(id -u) -eq 0 ]] || { echo "[e2e-tools] the e2e runs as root (a bridge, iptables chains, containerd)" >&2; exit 1; }
[[ ${#need[@]} -eq 0 ]] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "[e2e-tools] the e2e needs: ${need[*]} (install them with your package manager)" >&2; exit 1; }
echo "[e2e-tools] installing ${need[*]} (Debian packages)" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
