// Gateway API keys: what an app team sends to the gateway (`Authorization: Bearer <key>`). A GatewayAPIKey holds
// only the key's SHA-256 (the gateway hashes the bearer token and looks the digest up), so the key itself is
// generated here, shown once by the CLI and stored nowhere: reading the cluster never yields a usable key.
import { randomBytes } from 'node:crypto';
import { accountMissingMessage, isRoutedNamespace } from '../compiler/gate.ts';
import { GATEWAY_KEY_PREFIX } from '../domain/api-keys.ts';
import { KubeApiError, kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import type { Account, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';
import { API_VERSION, GROUP, VERSION } from '../schema/resources.ts';
import { sha256Hex } from './management-keys.ts';

export { GATEWAY_KEY_PREFIX };

export function generateGatewayKey(): string {
  return GATEWAY_KEY_PREFIX + randomBytes(32).toString('hex');
}

export interface CreateGatewayKeyOptions {
  /** GatewayAPIKey name; default `gateway-key-<random>`. */
  name?: string;
  /** spec.workspace; absent: the namespace's default Workspace. */
  workspace?: string;
  /** spec.guardrail. */
  guardrail?: string;
  /** spec.expiresAt (RFC 3339, see expiryTime). */
  expiresAt?: string;
  /** spec.models: the model allowlist. */
  models?: string[];
  /** spec.limits. */
  limits?: { requestsPerMinute?: number; tokensPerMinute?: number; maxInFlight?: number };
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/** `90s`, `15m`, `1h30m`, `30d`, `2w`: a positive duration in ms; undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+[smhdw])+$/.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)([smhdw])/g)) ms += Number(n) * UNIT_MS[unit!]!;
  return ms > 0 && Number.isSafeInteger(ms) ? ms : undefined;
}

/**
 * `--expires`: a duration from `now` (`30d`, `12h`, `1h30m`) or an RFC 3339 time with its offset (`2027-01-31T00:00:00Z`),
 * in the future. Returns the RFC 3339 UTC time for spec.expiresAt, or an error message saying what was wrong.
 */
export function expiryTime(text: string, now: number): { at: string } | { error: string } {
  const ms = parseDuration(text);
  if (ms !== undefined) return { at: new Date(now + ms).toISOString().replace(/\.\d{3}Z$/, 'Z') };
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(text) ||
    Number.isNaN(Date.parse(text))
  ) {
    return {
      error: `--expires ${JSON.stringify(text)} is neither a duration (90s, 15m, 12h, 30d, 2w, 1h30m) nor an RFC 3339 time with an offset (2027-01-31T00:00:00Z)`,
    };
  }
  const at = Date.parse(text);
  if (at <= now) return { error: `--expires ${text} is in the past: the key would never work` };
  return { at: new Date(at).toISOString().replace(/\.000Z$/, 'Z') };
}

/** The GatewayAPIKey object for a key with the given hash. */
export function gatewayKeyObject(
  namespace: string,
  name: string,
  hash: string,
  opts: CreateGatewayKeyOptions = {},
): GatewayAPIKey {
  return {
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'byok-operator' } },
    spec: {
      hash,
      ...(opts.workspace ? { workspace: opts.workspace } : {}),
      ...(opts.guardrail ? { guardrail: opts.guardrail } : {}),
      ...(opts.expiresAt ? { expiresAt: opts.expiresAt } : {}),
      ...(opts.models ? { models: opts.models } : {}),
      ...(opts.limits && Object.keys(opts.limits).length > 0 ? { limits: opts.limits } : {}),
    },
  } as GatewayAPIKey;
}

/** A list of the namespace, or undefined when it cannot be read (no list rights): a warning is never worth failing for. */
async function listOf<T>(kubeConfig: KubeAccess, namespace: string, plural: string): Promise<T[] | undefined> {
  const path = `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${plural}`;
  // The client already waits out the apiserver's 429s (src/kube/client.ts); what still fails is left unread.
  try {
    return (await kubeClient(kubeConfig).request<{ items: T[] }>('GET', path)).items;
  } catch {
    return undefined;
  }
}

/**
 * Why the key will not be usable yet, read before it is written (the operator will say the same as Ready=False
 * AccountMissing or NoWorkspace); empty when it will be. Never fails the command.
 */
async function usabilityWarnings(
  kubeConfig: KubeAccess,
  namespace: string,
  workspace: string | undefined,
): Promise<string[]> {
  const out: string[] = [];
  const accounts = await listOf<Account>(kubeConfig, namespace, 'accounts');
  if (accounts !== undefined && !isRoutedNamespace(accounts)) out.push(accountMissingMessage(namespace, 'key'));
  const items = await listOf<Workspace>(kubeConfig, namespace, 'workspaces');
  if (items === undefined) return out;
  if (workspace !== undefined) {
    if (!items.some((w) => w.metadata.name === workspace))
      out.push(
        `Workspace "${workspace}" does not exist in namespace ${namespace}: the gateway refuses the key (403) until it does`,
      );
  } else if (!items.some((w) => w.spec.default === true)) {
    out.push(
      `namespace ${namespace} has no default Workspace: the gateway refuses the key (403) until one exists (a Workspace with spec.default: true) or --workspace names one`,
    );
  }
  return out;
}

/**
 * Creates a gateway API key in the account `namespace`. Returns the key, which exists nowhere else (the caller
 * prints it once), its SHA-256 (for credential filters, `allowedApiKeyHashes`) and why it cannot be used yet, if so.
 */
export async function createGatewayKey(
  kubeConfig: KubeAccess,
  namespace: string,
  opts: CreateGatewayKeyOptions = {},
): Promise<{ key: string; hash: string; name: string; warnings: string[] }> {
  const key = generateGatewayKey();
  const hash = sha256Hex(key);
  const name = opts.name ?? `gateway-key-${randomBytes(4).toString('hex')}`;
  const warnings = await usabilityWarnings(kubeConfig, namespace, opts.workspace);
  await kubeClient(kubeConfig).request(
    'POST',
    `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/gatewayapikeys`,
    { body: gatewayKeyObject(namespace, name, hash, opts) },
  );
  return { key, hash, name, warnings };
}

/**
 * Rotates the key `name`: a new secret for the same GatewayAPIKey (same workspace, guardrail, models, limits and
 * counts), the old one still accepted for `overlapMs`, then refused. One merge patch: hash becomes the new secret's,
 * previousHash the old one, previousHashExpiresAt the end of the overlap. A previous secret still in its overlap is
 * cut at once (`cut` says so). Returns the new key, shown once.
 *
 * No resourceVersion precondition: the operator writes the key's status (Ready, spend) at any time, and that moved
 * the version under a rotation for nothing. The CRD's transition rule is the guard that matters: hash may change only
 * when previousHash takes the hash the object holds, so a concurrent rotation (the hash read here is no longer the
 * stored one) is refused by the apiserver and nothing is written or lost.
 */
export async function rotateGatewayKey(
  kubeConfig: KubeAccess,
  namespace: string,
  name: string,
  overlapMs: number,
  now: number = Date.now(),
): Promise<{ key: string; hash: string; previousHash: string; previousUntil: string; cut: string | undefined }> {
  const path = `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/gatewayapikeys/${encodeURIComponent(name)}`;
  const client = kubeClient(kubeConfig);
  const current = await client.request<GatewayAPIKey>('GET', path);
  const key = generateGatewayKey();
  const hash = sha256Hex(key);
  const previousUntil = new Date(now + overlapMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const earlier = current.spec.previousHashExpiresAt;
  const cut = current.spec.previousHash && earlier && Date.parse(earlier) > now ? earlier : undefined;
  try {
    await client.request('PATCH', path, {
      contentType: 'application/merge-patch+json',
      body: { spec: { hash, previousHash: current.spec.hash, previousHashExpiresAt: previousUntil } },
    });
  } catch (err) {
    // The transition rule's refusal (422) says "hash may change only by a rotation", which reads as nonsense to
    // someone who just ran one: say what happened when the stored hash is no longer the one read.
    if (err instanceof KubeApiError && err.status === 422) {
      // A failed read here must not hide the refusal it was asked to explain.
      const stored = await client.request<GatewayAPIKey>('GET', path).catch(() => undefined);
      if (stored && stored.spec.hash !== current.spec.hash)
        throw new Error(
          `GatewayAPIKey ${namespace}/${name} was rotated by someone else while this rotation ran: nothing written; read its hash and rotate again if still needed`,
        );
    }
    throw err;
  }
  return { key, hash, previousHash: current.spec.hash, previousUntil, cut };
}
