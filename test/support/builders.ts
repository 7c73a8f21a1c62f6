// Object builders for tests, one function per kind with options (cert-manager's test/unit/gen is the model):
//   credential('oa', withProvider('anthropic'), withSecret('oa-key'), withFlags({ isFallback: true }))
// They build plain objects (no I/O); `tenant.ts` creates them in a cluster. Defaults are the smallest valid object.
import { createHash } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../../src/schema/generated/types.ts';
import { API_VERSION } from '../../src/schema/resources.ts';

type Meta = { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
/** An option edits the object being built. */
export type Option<T> = (o: T) => void;

function build<T>(o: T, options: readonly Option<T>[]): T {
  for (const opt of options) opt(o);
  return o;
}

/** Any kind: its namespace (left out, the client's namespace applies). */
export const inNamespace =
  <T extends { metadata?: Meta | object }>(namespace: string): Option<T> =>
  (o) =>
    void ((o.metadata as Meta).namespace = namespace);
/** Any kind: labels merged into metadata.labels. */
export const withLabels =
  <T extends { metadata?: Meta | object }>(labels: Record<string, string>): Option<T> =>
  (o) => {
    const m = o.metadata as Meta;
    m.labels = { ...m.labels, ...labels };
  };
/** Any kind: annotations merged into metadata.annotations. */
export const withAnnotations =
  <T extends { metadata?: Meta | object }>(annotations: Record<string, string>): Option<T> =>
  (o) => {
    const m = o.metadata as Meta;
    m.annotations = { ...m.annotations, ...annotations };
  };
/** Any kind: fields merged into metadata (generation, resourceVersion, uid, creationTimestamp as a store has them). */
export const withMetadata =
  <T extends { metadata?: object }>(metadata: Partial<NonNullable<T['metadata']>>): Option<T> =>
  (o) =>
    void Object.assign(o.metadata as object, metadata);
/** Any kind with a status: the status it was read back with. */
export const withStatus =
  <T extends { status?: unknown }>(status: T['status']): Option<T> =>
  (o) =>
    void (o.status = status);
/** Any kind: fields merged into spec (for what has no option of its own). */
export const withSpec =
  <T extends { spec: object }>(spec: Partial<T['spec']>): Option<T> =>
  (o) =>
    void Object.assign(o.spec, spec);

// ---- Secret ----

/** A Secret holding `value` under `key` (default `key`, what a BYOKCredential's secretRef reads by default). */
export function secret(name: string, value: string, ...options: Option<V1Secret>[]): V1Secret {
  return build<V1Secret>({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { key: value } }, options);
}
export const underKey =
  (key: string): Option<V1Secret> =>
  (s) => {
    const value = Object.values(s.stringData ?? {})[0] ?? '';
    s.stringData = { [key]: value };
  };

// ---- Account ----

export function account(name = 'account', ...options: Option<Account>[]): Account {
  return build<Account>({ apiVersion: API_VERSION, kind: 'Account', metadata: { name }, spec: {} } as Account, options);
}
export const withMaxCredentials =
  (maxCredentials: number): Option<Account> =>
  (a) =>
    void (a.spec.limits = { ...a.spec.limits, maxCredentials });

// ---- Workspace ----

/** A Workspace; `asDefault()` makes it the namespace's default. */
export function workspace(name = 'default', ...options: Option<Workspace>[]): Workspace {
  return build<Workspace>(
    { apiVersion: API_VERSION, kind: 'Workspace', metadata: { name }, spec: {} } as Workspace,
    options,
  );
}
export const asDefault = (): Option<Workspace> => (w) => void (w.spec.default = true);

// ---- BYOKCredential ----

/** An OpenAI credential reading Secret `<name>-key` unless options say otherwise. */
export function credential(name: string, ...options: Option<BYOKCredential>[]): BYOKCredential {
  return build<BYOKCredential>(
    {
      apiVersion: API_VERSION,
      kind: 'BYOKCredential',
      metadata: { name },
      spec: { provider: 'openai', secretRef: { name: `${name}-key` } },
    } as BYOKCredential,
    options,
  );
}
export const withProvider =
  (provider: string): Option<BYOKCredential> =>
  (c) =>
    void (c.spec.provider = provider as BYOKCredential['spec']['provider']);
export const withSecret =
  (name: string, key?: string): Option<BYOKCredential> =>
  (c) =>
    void (c.spec.secretRef = { name, ...(key ? { key } : {}) });
export const inWorkspace =
  <T extends BYOKCredential | GatewayAPIKey>(workspaceName: string): Option<T> =>
  (o) =>
    void ((o.spec as { workspace?: string }).workspace = workspaceName);

// ---- GatewayAPIKey ----

/** A GatewayAPIKey for `hash` (sha256 hex of the secret key). */
/**
 * The SHA-256 hex a GatewayAPIKey stores for a gateway key. Digested here rather than with the product's own function,
 * so a test holds the product to an independent digest.
 */
export const keyHash = (key: string): string => createHash('sha256').update(key).digest('hex');

export function gatewayKey(name: string, hash: string, ...options: Option<GatewayAPIKey>[]): GatewayAPIKey {
  return build<GatewayAPIKey>(
    { apiVersion: API_VERSION, kind: 'GatewayAPIKey', metadata: { name }, spec: { hash } } as GatewayAPIKey,
    options,
  );
}
export const withGuardrail =
  (guardrailName: string): Option<GatewayAPIKey> =>
  (k) =>
    void (k.spec.guardrail = guardrailName);
export const disabled = (): Option<GatewayAPIKey> => (k) => void (k.spec.disabled = true);

// ---- Guardrail ----

export function guardrail(name: string, ...options: Option<Guardrail>[]): Guardrail {
  return build<Guardrail>(
    { apiVersion: API_VERSION, kind: 'Guardrail', metadata: { name }, spec: {} } as Guardrail,
    options,
  );
}
export const withBudget =
  (budget: NonNullable<Guardrail['spec']['budget']>): Option<Guardrail> =>
  (g) =>
    void (g.spec.budget = budget);
