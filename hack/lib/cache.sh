# Sourced by every script that keeps a build or a download outside the repo: one cache root for all of them.
#   BYOK_CACHE_DIR=dir   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
# scripts/cache-root.mjs is the same root in JavaScript (the bootstrap, the benches); Jest's client-node bundle keeps
# its own line, as test/support/ imports only src/ and itself.
# shellcheck shell=bash
cache_root="${BYOK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator}"
