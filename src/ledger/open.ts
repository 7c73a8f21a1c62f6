// One entry point for the gateway's wiring: Redis when a URL is given (several replicas), else embedded with an
// optional snapshot file (one replica).
import { createEmbeddedLedger } from './embedded.ts';
import { type KeySpace, keySpace } from './keys.ts';
import type { Ledger } from './ledger.ts';

export interface LedgerConfig {
  redisUrl?: string;
  /** Key prefix (Redis); default byok:ledger: */
  keyPrefix?: string;
  /** Embedded only: where the month survives a restart. */
  snapshotPath?: string;
  onSnapshotError?: (err: Error) => void;
  onQuarantine?: (key: string, reason: string) => void;
}

export async function openLedger(config: LedgerConfig): Promise<{ ledger: Ledger; keys: KeySpace }> {
  const keys = keySpace(config.keyPrefix !== undefined ? { prefix: config.keyPrefix } : {});
  if (config.redisUrl) {
    // Loaded only when used: a gateway on the embedded ledger never loads the Redis client.
    const { createRedisLedger } = await import('./redis.ts');
    return { ledger: await createRedisLedger({ url: config.redisUrl }), keys };
  }
  return {
    ledger: createEmbeddedLedger({
      ...(config.snapshotPath ? { snapshotPath: config.snapshotPath } : {}),
      ...(config.onSnapshotError ? { onSnapshotError: config.onSnapshotError } : {}),
      ...(config.onQuarantine ? { onQuarantine: config.onQuarantine } : {}),
    }),
    keys,
  };
}
