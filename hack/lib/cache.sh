# Sourced by every script that keeps a build or a download outside the repo: one cache root for all of them.
#   BYOK_CACHE_DIR=dir   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
# scripts/bootstrap.mjs and test/support/client-node-bundle.mjs compute the same root in JavaScript.
# shellcheck shell=bash
cache_root="${BYOK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator}"
