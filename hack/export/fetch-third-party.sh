#!/usr/bin/env bash
# Fetches the schemas an export is validated against that no module proxy serves: Envoy AI Gateway's CRDs and
# agentgateway's CRDs and standalone config schema, at the commits pinned in third-party.lock, each checked against
# its pinned sha256, into a cache outside the repo. A local copy comes first when BYOK_THIRD_PARTY_DIR names one (laid
# out as the lock's first column); otherwise the file comes from raw.githubusercontent.com. A file that differs from
# its pin is refused, wherever it came from. When a file can be got from neither, one message names what is missing
# and how to get it, and the script exits 1. Prints the cache folder last.
#
#   BYOK_THIRD_PARTY_DIR=dir   a local copy (this team's machines reach no code host: CI points it at ../shared/third-party)
#   BYOK_THIRD_PARTY_URL=url   where `<repo>/<commit>/<path>` is fetched from (default https://raw.githubusercontent.com)
#   BYOK_CACHE_DIR=dir         cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/byok-operator)
set -euo pipefail

log() { printf '[third-party] %s\n' "$*" >&2; }
lock="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/third-party.lock"
base_url="${BYOK_THIRD_PARTY_URL:-https://raw.githubusercontent.com}"
local_copy="${BYOK_THIRD_PARTY_DIR:-}"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
# The folder is named by the lock's digest: a new pin is a new folder, never a stale mix.
out="$cache_root/export-crds/third-party-$(sha256sum "$lock" | cut -c1-16)"

files=() sums=() repos=() commits=() paths=()
while read -r file sum repo commit path; do
  [[ -z "$file" || "$file" == \#* ]] && continue
  files+=("$file") sums+=("$sum") repos+=("$repo") commits+=("$commit") paths+=("$path")
done <"$lock"

matches() { [[ "$(sha256sum "$1" | cut -c1-64)" == "$2" ]]; }
source_of() { printf '%s@%s:%s' "${repos[$1]}" "${commits[$1]}" "${paths[$1]}"; }

# A cache hit is re-checked file by file (thirteen small files): a cache edited by hand is fetched again.
if [[ -f "$out/.complete" ]]; then
  ok=1
  for i in "${!files[@]}"; do [[ -f "$out/${files[$i]}" ]] && matches "$out/${files[$i]}" "${sums[$i]}" || ok=0; done
  if ((ok)); then
    echo "$out"
    exit 0
  fi
  log "the cache in $out differs from the pins: getting the files again"
  rm -rf "$out"
fi

mkdir -p "$cache_root/export-crds"
# Filled beside the cache folder and renamed into place whole, so parallel runs never see half a cache.
work="$(mktemp -d "$cache_root/export-crds/.third-party-XXXXXX")"
trap 'rm -rf "$work"' EXIT
missing=()
online=1
for i in "${!files[@]}"; do
  file="${files[$i]}"
  mkdir -p "$work/$(dirname "$file")"
  if [[ -n "$local_copy" && -f "$local_copy/$file" ]]; then
    cp "$local_copy/$file" "$work/$file"
    if ! matches "$work/$file" "${sums[$i]}"; then
      log "refused $local_copy/$file: its sha256 is not the pinned ${sums[$i]} of $(source_of "$i") (hack/export/third-party.lock). Replace it with that file unmodified, or unset BYOK_THIRD_PARTY_DIR to fetch it."
      exit 1
    fi
    continue
  fi
  url="$base_url/${repos[$i]}/${commits[$i]}/${paths[$i]}"
  # After the first failed fetch the code host is taken as unreachable: one clear message, not a wait per file.
  if ((online)) && curl -fsSL --connect-timeout 10 --max-time 120 -o "$work/$file" "$url" 2>/dev/null; then
    if ! matches "$work/$file" "${sums[$i]}"; then
      log "refused $url: its sha256 is not the pinned ${sums[$i]} (hack/export/third-party.lock)"
      exit 1
    fi
    continue
  fi
  online=0
  missing+=("$file  ($(source_of "$i"))")
done

if ((${#missing[@]} > 0)); then
  {
    echo "[third-party] the export tests need ${#missing[@]} third-party schema file(s) that no package registry serves, and could get them from neither source:"
    printf '  %s\n' "${missing[@]}"
    echo "  - $base_url was not reachable."
    if [[ -n "$local_copy" ]]; then
      echo "  - BYOK_THIRD_PARTY_DIR=$local_copy does not hold them."
    else
      echo "  - BYOK_THIRD_PARTY_DIR (a local copy) is not set."
    fi
    echo "Get them by allowing HTTPS to raw.githubusercontent.com, or by setting BYOK_THIRD_PARTY_DIR to a folder holding those files"
    echo "unmodified at the paths on the left (each is checked against its sha256 in hack/export/third-party.lock); then run again."
  } >&2
  exit 1
fi

touch "$work/.complete"
# Another run may have renamed its folder into place first; theirs passed the same checks.
mv -T "$work" "$out" 2>/dev/null || [[ -f "$out/.complete" ]]
log "checked $((${#files[@]})) files against their pins into $out"
echo "$out"
