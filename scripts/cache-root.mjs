// The cache root every build and download keeps its outputs under, outside the repo: BYOK_CACHE_DIR, else
// $XDG_CACHE_HOME/byok-operator, else ~/.cache/byok-operator (hack/lib/cache.sh is the shell's copy). Plain
// JavaScript: the bootstrap imports it on the system Node, before any TypeScript can load.
import { homedir } from 'node:os';
import { join } from 'node:path';

export function cacheRoot() {
  return process.env.BYOK_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'byok-operator');
}
