#!/usr/bin/env bash
# Bounded schemathesis run against a dev-like stack (control plane + operator + API, `byok-operator dev`):
# every check, all phases including the stateful one, at least 1,000 cases. Fails on any 5xx or schema
# violation. Reports go to .ci/artifacts/schemathesis/ (JUnit + NDJSON) and the summary to the log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SCHEMATHESIS_VERSION=4.32.5
source hack/lib/cache.sh
VENV="${cache_root}/schemathesis-venv"
if ! "${VENV}/bin/st" --version 2>/dev/null | grep -q "${SCHEMATHESIS_VERSION}"; then
  echo "[schemathesis] installing schemathesis ${SCHEMATHESIS_VERSION} into ${VENV}"
  python3 -m venv "${VENV}" || { apt-get install -y python3-venv >/dev/null && python3 -m venv "${VENV}"; }
  "${VENV}/bin/pip" install --quiet "schemathesis==${SCHEMATHESIS_VERSION}"
fi

ARTIFACTS="${PWD}/.ci/artifacts/schemathesis"
rm -rf "${ARTIFACTS}" && mkdir -p "${ARTIFACTS}"
DEV_DIR="$(mktemp -d)"
export BYOK_DEV_DIR="${DEV_DIR}"
# bootstrap.mjs provides Node >= 22.19 and the control-plane binaries; the dev stack itself runs as our own
# child (not under bootstrap's spawnSync), so the trap below really stops it and its control plane.
{ read -r BOOT_PATH; read -r BOOT_BIN; } < <(node scripts/bootstrap.mjs --control-plane -- bash -c 'echo "$PATH"; echo "$BYOK_CONTROL_PLANE_BIN"' | tail -n 2)
PATH="${BOOT_PATH}" BYOK_CONTROL_PLANE_BIN="${BOOT_BIN}" node src/cli/main.ts dev > "${ARTIFACTS}/dev-stack.log" 2>&1 &
DEV_PID=$!
cleanup() {
  kill -TERM "${DEV_PID}" 2>/dev/null || true
  wait "${DEV_PID}" 2>/dev/null || true
  rm -rf "${DEV_DIR}"
}
trap cleanup EXIT

for _ in $(seq 1 600); do
  [[ -s "${DEV_DIR}/connection.json" ]] && break
  kill -0 "${DEV_PID}" 2>/dev/null || { cat "${ARTIFACTS}/dev-stack.log" >&2; echo "[schemathesis] dev stack exited" >&2; exit 1; }
  sleep 0.5
done
[[ -s "${DEV_DIR}/connection.json" ]] || { echo "[schemathesis] dev stack not ready" >&2; exit 1; }
read -r API_URL MANAGEMENT_KEY < <(node -e 'const c=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(c.apiBaseUrl, c.managementKey)' "${DEV_DIR}/connection.json")

# The dev API allows 600 requests per 10 s per management key; stay under it so answers are not all 429.
# One worker: Hypothesis parses lambda sources with `ast` from every worker thread, and CPython 3.11's `ast`
# is not thread-safe ("AST constructor recursion depth mismatch"); the rate limit bounds throughput anyway.
# No example database: every run starts from the seed alone, as on a fresh CI machine (a stored example can
# otherwise replay a draw Hypothesis cannot make, e.g. a `key` past its 65,536-character maxLength).
"${VENV}/bin/st" --config-file .ci/schemathesis.toml --no-color run "${API_URL}/openapi.json" \
  --checks all \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-100}" \
  --seed "${SCHEMATHESIS_SEED:-20261123}" \
  --generation-database none \
  --rate-limit 55/s \
  --workers 1 \
  --request-timeout 15 \
  -H "Authorization: Bearer ${MANAGEMENT_KEY}" \
  --report junit,ndjson \
  --report-dir "${ARTIFACTS}" \
  --output-sanitize true "$@" > "${ARTIFACTS}/summary.txt" 2>&1 || status=$?
status=${status:-0}
# Schemathesis closes its console report with a pytest-style "=== 1 warning in 120s ===" line, which a CI that
# reads runners' closing lines takes for a pytest run that executed no test. So the full report stays in the
# artifact (printed whole only on failure) and the log gets one plain "N passed, N failed" line.
if [[ ${status} -ne 0 ]]; then cat "${ARTIFACTS}/summary.txt"; fi
cases="$(grep -A1 -E '^Test cases:' "${ARTIFACTS}/summary.txt" | tail -n 1 | sed 's/^ *//')"
count() { awk -v what="$1" '{ for (i = 2; i <= NF; i++) if ($i ~ "^" what) n += $(i - 1) } END { print n + 0 }' <<<"${cases//,/}"; }
passed="$(count passed)"
failed=$(( $(count failed) + $(count errored) ))
echo "[schemathesis] ${cases} (full report: ${ARTIFACTS}/summary.txt)"
echo "[schemathesis] exit ${status}; reports in ${ARTIFACTS}"
echo "schemathesis: ${passed} passed, ${failed} failed"
exit "${status}"
