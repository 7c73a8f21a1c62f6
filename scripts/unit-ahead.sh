#!/usr/bin/env bash
# The unit project with the process clock moved ahead (libfaketime; default a year and a month): a test that takes
# its time from a calendar instead of a clock it controls fails here on the day it is written, not on the day its
# date passes. Both ledgers forget a window a week after it ends by the real clock, so counts metered at a fixed
# date stop adding up a week later; that is how 2026-11-23 broke the ledger tests on 2026-12-01.
# The monotonic clock is left alone: timers and timeouts run as usual. (redis-server does not start under
# libfaketime, so the integration project cannot run here; its ledger tests take the same MONDAY.)
#
#   npm run test:unit:ahead [-- +40d]
set -euo pipefail
offset="${1:-+400d}"
# Only this run needs libfaketime: installed here (Debian's faketime), not by `npm test`.
bash "$(dirname "${BASH_SOURCE[0]}")/test-tools.sh" faketime
ahead="$(faketime -f "$offset" date -u +%Y-%m-%dT%H:%MZ)"
echo "[unit-ahead] the unit project with the clock at $ahead" >&2
FAKETIME_DONT_FAKE_MONOTONIC=1 exec faketime -f "$offset" npm run jest -- --selectProjects unit --silent
