// Hot reload of the mounted routing config. kubelet's atomic writer puts each generation in `..<timestamp>/`,
// points `..data_tmp` at it and renames it over `..data`; visible files are symlinks through `..data`.
// We watch the directory (rename events) and also poll the `..data` target (fs.watch is best effort), load
// the new generation fully, and swap only when every checksum verifies: a bad generation keeps the last good one.
import { type FSWatcher, statSync, watch } from 'node:fs';
import { join } from 'node:path';
import { INDEX_KEY } from '../contract/routing.ts';
import type { ModelCatalog, ProviderPayload } from '../domain/index.ts';
import { type CredentialPayloadOptions, createCredentialDecryptor } from './credentials.ts';
import { loadRoutingConfig, type RoutingConfig, RoutingConfigError, resolveGeneration } from './load.ts';
import { type GatewayRequest, type PlanOutcome, planFor } from './plan.ts';

export interface WatchOptions {
  configDir: string;
  bundleDir: string;
  keyDir: string;
  onReload?: (config: RoutingConfig, previous: RoutingConfig | undefined) => void;
  /**
   * A generation that failed to load (the last good config stays in use), once per generation. `pending`: it looks
   * half-projected (a shard missing, or from another swap: kubelet refreshes each ConfigMap of the volume from its
   * own cache), which the next projection completes; `rejected`: corrupt, or still refused after `pendingPolls`.
   */
  onError?: (err: Error, failure: ReloadFailure) => void;
  /** Poll interval for the `..data` target (default 1000 ms). */
  pollMs?: number;
  /** Consecutive refused loads before a half-projected config counts as rejected (default 120: 2 min at 1 s). */
  pendingPolls?: number;
  /** See DecryptorOptions.generationCheckMs (default 0). */
  generationCheckMs?: number;
}

export type ReloadFailure = 'pending' | 'rejected';

/** Errors kubelet cures by itself: the volume's ConfigMaps were not all refreshed yet (docs/gateway.md, "Metrics"). */
function halfProjected(err: unknown): boolean {
  return (
    err instanceof RoutingConfigError &&
    (err.code === 'incomplete' || err.code === 'checksum' || err.code === 'missing')
  );
}

export interface RoutingConfigWatcher {
  /** The last good config; undefined until one loads. */
  current(): RoutingConfig | undefined;
  /** Load now; true when a new config was swapped in. */
  reload(): boolean;
  decryptCredential(credentialId: string): string;
  /** `read(plaintext)` of a credential, decrypted once per mounted envelope (see CredentialDecryptor.open). */
  openCredential<T>(credentialId: string, read: (plaintext: string) => T): T;
  /** The credential's parsed payload, decrypted and parsed once per mounted envelope (see CredentialDecryptor.payload). */
  credentialPayload(credentialId: string, options?: CredentialPayloadOptions): ProviderPayload;
  planFor(request: GatewayRequest, catalog: ModelCatalog, now?: Date): PlanOutcome;
  /** See CredentialDecryptor.bundleGeneration: the generation requests from now on open envelopes from. */
  bundleGeneration(): string;
  close(): void;
}

function stamp(dir: string): string {
  const gen = resolveGeneration(dir);
  if (gen !== dir) return gen;
  try {
    const s = statSync(join(dir, INDEX_KEY));
    return `${s.mtimeMs}:${s.size}:${s.ino}`;
  } catch {
    return 'absent';
  }
}

export function watchRoutingConfig(opts: WatchOptions): RoutingConfigWatcher {
  let current: RoutingConfig | undefined;
  let loadedStamp: string | undefined;
  let failedStamp: string | undefined;
  let failedAs: ReloadFailure | undefined;
  /** Refused loads since the last good one, across generations (a lagging ConfigMap may span several swaps). */
  let refusedLoads = 0;
  const pendingPolls = opts.pendingPolls ?? 120;
  const decryptor = createCredentialDecryptor({
    bundleDir: opts.bundleDir,
    keyDir: opts.keyDir,
    ...(opts.generationCheckMs ? { generationCheckMs: opts.generationCheckMs } : {}),
  });

  const reload = (): boolean => {
    const s = stamp(opts.configDir);
    if (s === loadedStamp) return false;
    try {
      const next = loadRoutingConfig(opts.configDir);
      loadedStamp = s;
      failedStamp = undefined;
      failedAs = undefined;
      refusedLoads = 0;
      if (current && next.version === current.version) return false;
      const previous = current;
      current = next;
      opts.onReload?.(next, previous);
      return true;
    } catch (err) {
      // Report each bad generation once, and once more if it turns from pending to rejected; keep retrying it
      // (kubelet may complete it without a new swap).
      refusedLoads++;
      const failure: ReloadFailure = halfProjected(err) && refusedLoads < pendingPolls ? 'pending' : 'rejected';
      if (failedStamp !== s || failedAs !== failure)
        opts.onError?.(err instanceof Error ? err : new Error(String(err)), failure);
      failedStamp = s;
      failedAs = failure;
      return false;
    }
  };

  let debounce: NodeJS.Timeout | undefined;
  const poke = () => {
    if (debounce) return;
    debounce = setTimeout(() => {
      debounce = undefined;
      reload();
    }, 10);
    debounce.unref?.();
  };

  reload();
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(opts.configDir, { persistent: false }, poke);
    watcher.on('error', () => undefined);
  } catch {
    watcher = undefined;
  }
  const poll = setInterval(reload, opts.pollMs ?? 1000);
  poll.unref?.();

  return {
    current: () => current,
    reload,
    decryptCredential(credentialId) {
      if (!current) throw new Error('routing config not loaded');
      return decryptor.decrypt(current, credentialId);
    },
    openCredential(credentialId, read) {
      if (!current) throw new Error('routing config not loaded');
      return decryptor.open(current, credentialId, read);
    },
    credentialPayload(credentialId, options) {
      if (!current) throw new Error('routing config not loaded');
      return decryptor.payload(current, credentialId, options);
    },
    bundleGeneration: () => decryptor.bundleGeneration(),
    planFor(request, catalog, now) {
      if (!current) return { ok: false, reason: 'unknown-api-key' };
      return planFor(current, request, catalog, now);
    },
    close() {
      watcher?.close();
      clearInterval(poll);
      if (debounce) clearTimeout(debounce);
    },
  };
}
