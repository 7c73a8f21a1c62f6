// Builders for compiler inputs shared by the compiler, bundle and SDK unit tests.
import { createHash } from 'node:crypto';
import type { AccountSnapshot, SnapshotCredential } from '../../../src/compiler/snapshot.ts';
import type { Account, BYOKCredential, BYOKCredentialSpec, GatewayAPIKey, Guardrail, Workspace } from '../../../src/schema/generated/types.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';

export const NOW = new Date('2026-01-01T00:00:00Z');
export const CREATED = '2025-06-01T00:00:00Z';

export const hashOf = (key: string) => createHash('sha256').update(key).digest('hex');

export function meta(namespace: string, name: string, created = CREATED) {
  return { name, namespace, creationTimestamp: created as unknown as Date };
}

export function credential(ns: string, name: string, spec: Partial<BYOKCredentialSpec> = {}, opts: { valid?: boolean; payload?: string; sortOrder?: number; label?: string } = {}): SnapshotCredential {
  const resource: BYOKCredential = {
    apiVersion: API_VERSION,
    kind: 'BYOKCredential',
    metadata: meta(ns, name),
    spec: { provider: 'openai', secretRef: { name: `${name}-secret`, key: 'key' }, ...spec },
  };
  const valid = opts.valid ?? true;
  return {
    resource,
    verdict: {
      valid,
      label: opts.label ?? 'sk-...abcd',
      sortOrder: opts.sortOrder ?? 0,
      ...(valid ? { payload: opts.payload ?? `sk-secret-${ns}-${name}` } : {}),
    },
  };
}

export function workspace(ns: string, name: string, spec: Workspace['spec'] = {}, created = CREATED): Workspace {
  return { apiVersion: API_VERSION, kind: 'Workspace', metadata: meta(ns, name, created), spec };
}

export function guardrail(ns: string, name: string, spec: Guardrail['spec'] = {}): Guardrail {
  return { apiVersion: API_VERSION, kind: 'Guardrail', metadata: meta(ns, name), spec };
}

export function apiKey(ns: string, name: string, spec: Partial<GatewayAPIKey['spec']> = {}): GatewayAPIKey {
  return { apiVersion: API_VERSION, kind: 'GatewayAPIKey', metadata: meta(ns, name), spec: { hash: hashOf(`${ns}/${name}`), ...spec } };
}

export function account(ns: string, spec: Account['spec'] = {}): Account {
  return { apiVersion: API_VERSION, kind: 'Account', metadata: meta(ns, 'account'), spec };
}

export function snapshot(ns: string, parts: Partial<Omit<AccountSnapshot, 'namespace'>> = {}): AccountSnapshot {
  return { namespace: ns, workspaces: [], guardrails: [], apiKeys: [], credentials: [], now: NOW, ...parts };
}

/** An account with `n` credentials over a few providers, a default workspace, a guardrail and two keys. */
export function sizedSnapshot(ns: string, n: number, payload = (i: number) => `sk-${ns}-${i}-payload`): AccountSnapshot {
  const providers = ['openai', 'anthropic', 'mistral', 'groq', 'google-vertex'] as const;
  const key = apiKey(ns, 'key-a');
  return snapshot(ns, {
    account: account(ns, { plan: 'enterprise' }),
    workspaces: [workspace(ns, 'main', { default: true, budgets: { monthly: 100 } })],
    guardrails: [guardrail(ns, 'g', { budget: { limitUsd: 10 } })],
    apiKeys: [key, apiKey(ns, 'key-b')],
    credentials: Array.from({ length: n }, (_, i) =>
      credential(
        ns,
        `cred-${String(i).padStart(5, '0')}`,
        {
          provider: providers[i % providers.length]!,
          displayName: `Credential ${i} of ${ns}`,
          isFallback: i % 7 === 0,
          allowedModels: i % 3 === 0 ? [`openai/gpt-${i % 11}`, `anthropic/claude-${i % 5}`] : undefined,
          allowedApiKeyHashes: i % 4 === 0 ? [key.spec.hash] : undefined,
        },
        { payload: payload(i), sortOrder: i, label: `sk-${hashOf(`${ns}${i}`).slice(0, 4)}...${hashOf(`${i}${ns}`).slice(0, 4)}` },
      ),
    ),
  });
}
