// Where scripts/install-oha.sh puts oha, under the cache root every script shares (scripts/cache-root.mjs).
import { join } from 'node:path';
import { cacheRoot } from '../../scripts/cache-root.mjs';

/** Where scripts/install-oha.sh installs oha. */
export const ohaPath = (): string => join(cacheRoot(), 'oha', 'bin', 'oha');
