#!/usr/bin/env bash
# Debian tools the tests run for real (never fakes). With no arguments, what `npm test` needs: the export's CRDs and
# schemas (below), redis-server for the spend ledger and lua5.4 for the Argo CD health checks. With arguments, only
# those packages (each names its command): `scripts/unit-ahead.sh` asks for faketime. Installs what is missing with
# apt-get (as root, or through sudo); on other systems it names what to install. `npm test`, `npm run
# test:integration` and .ci/run call it; a no-op when present.
set -euo pipefail
if [[ $# -eq 0 ]]; then
  # The export's tests validate against Envoy Gateway's and the Gateway API's CRDs, from their Go modules, and against
  # Envoy AI Gateway's and agentgateway's schemas at pinned commits: when those cannot be got, the run stops here with
  # one message naming what is missing and how to get it (BYOK_THIRD_PARTY_DIR), not with a failure per test.
  "$(dirname "${BASH_SOURCE[0]}")/../hack/export/fetch-crds.sh" >/dev/null
  "$(dirname "${BASH_SOURCE[0]}")/../hack/export/fetch-third-party.sh" >/dev/null
  set -- redis-server lua5.4
fi
need=()
for package in "$@"; do
  command -v "$package" >/dev/null 2>&1 || need+=("$package")
done
[[ ${#need[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[test-tools] the tests need: ${need[*]} (install them with your package manager)" >&2
  exit 1
fi
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "[test-tools] installing ${need[*]} (Debian packages the tests run)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
