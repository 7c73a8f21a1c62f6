#!/bin/sh
# The image's entrypoint: V8 heap flags per process (docs/gateway.md, "Runtime flags"). The gateway, the operator and
# the API are different workloads; each gets the Dockerfile's BYOK_<PROCESS>_NODE_OPTIONS (`run` runs the operator and
# the API in one process and takes the operator's) unless NODE_OPTIONS is set
# (the chart sets it per container when its values say so).
set -eu
if [ -z "${NODE_OPTIONS:-}" ]; then
  case "${1:-run}" in
    gateway) NODE_OPTIONS="${BYOK_GATEWAY_NODE_OPTIONS:-}" ;;
    api) NODE_OPTIONS="${BYOK_API_NODE_OPTIONS:-}" ;;
    *) NODE_OPTIONS="${BYOK_OPERATOR_NODE_OPTIONS:-}" ;;
  esac
  export NODE_OPTIONS
fi
exec node /app/dist/cli/main.js "$@"
