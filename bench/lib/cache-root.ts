// The cache root of hack/lib/cache.sh (and scripts/bootstrap.mjs): where scripts/install-oha.sh puts oha.
import { homedir } from 'node:os';
import { join } from 'node:path';

export const cacheRoot = (): string =>
  process.env.BYOK_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'byok-operator');

/** Where scripts/install-oha.sh installs oha. */
export const ohaPath = (): string => join(cacheRoot(), 'oha', 'bin', 'oha');
