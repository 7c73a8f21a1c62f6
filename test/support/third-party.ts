// Envoy AI Gateway's and agentgateway's schemas for the export tests, read only from the cache that
// hack/export/fetch-third-party.sh fills (pinned commits, each file checked against its pinned sha256; a local copy
// first when BYOK_THIRD_PARTY_DIR names one). `npm test` runs the script before anything else (scripts/test-tools.sh);
// a file run by hand runs it here, and when it cannot get the files its one message says which and how.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const script = join(import.meta.dirname, '..', '..', 'hack', 'export', 'fetch-third-party.sh');
let cache: string | undefined;

/** The cache folder (envoy-ai-gateway/…, agentgateway/… as hack/export/third-party.lock lists them). */
export function thirdPartyDir(): string {
  if (cache !== undefined) return cache;
  try {
    cache = execFileSync(script, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
      .trim()
      .split('\n')
      .at(-1)!;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(stderr || `${script} failed: ${(err as Error).message}`);
  }
  return cache;
}

/** One third-party file by its place in the cache, e.g. `agentgateway/standalone-config.schema.json`. */
export const thirdPartyFile = (file: string): string => join(thirdPartyDir(), file);
