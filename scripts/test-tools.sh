#!/usr/bin/env bash
# Debian tools the tests run for real (never fakes): redis-server for the spend ledger, lua5.4 for the Argo CD
# health checks, faketime for the unit project with its clock ahead (scripts/unit-ahead.sh). Installs what is
# missing with apt-get (as root, or through sudo); on other systems it names what to install. `npm test`, `npm run test:integration` and .ci/run call it; a no-op when present.
set -euo pipefail
# The export's tests validate against Envoy Gateway's and the Gateway API's CRDs, from their Go modules, and against
# Envoy AI Gateway's and agentgateway's schemas at pinned commits: when those cannot be got, the run stops here with
# one message naming what is missing and how to get it (BYOK_THIRD_PARTY_DIR), not with a failure per test.
"$(dirname "${BASH_SOURCE[0]}")/../hack/export/fetch-crds.sh" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/../hack/export/fetch-third-party.sh" >/dev/null
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v lua5.4 >/dev/null 2>&1 || need+=(lua5.4)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
[[ ${#need[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[test-tools] the integration tests need: ${need[*]} (install them with your package manager)" >&2
  exit 1
fi
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "[test-tools] installing ${need[*]} (Debian packages the integration tests run)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
