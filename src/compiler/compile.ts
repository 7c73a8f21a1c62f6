// The pure compiler: one account's cached state -> its routing document (CompiledAccount).
// Only valid, non-conflicting state is compiled; the output is a function of the input alone
// (snapshot.now included), with every list in a stable order.
import { isApiKeyLive, normalizeKeyHash } from '../domain/api-keys.ts';
import type {
  BudgetInterval,
  BudgetLimit,
  CompiledAccount,
  CompiledApiKey,
  CompiledCredential,
  CompiledGuardrail,
  CompiledWorkspace,
} from '../domain/compiled.ts';
import { publicId } from '../domain/ids.ts';
import { ExclusionReason } from '../schema/conditions.ts';
import { compareStrings, creationTime, electDefaultWorkspace } from './elect.ts';
import type { AccountSnapshot, SnapshotCredential } from './snapshot.ts';

const INTERVALS: readonly BudgetInterval[] = ['daily', 'weekly', 'monthly', 'lifetime'];
/** Guardrail budgets without a resetInterval reset monthly (the CRD has no default; documented in docs/compiler.md). */
export const DEFAULT_RESET_INTERVAL: BudgetInterval = 'monthly';

/** Why a credential is left out of the compiled account, or null when it is compiled. */
export function credentialExclusion(
  entry: SnapshotCredential,
  workspaceNames: ReadonlySet<string>,
  liveHashes: ReadonlySet<string>,
): ExclusionReason | null {
  const { resource, verdict } = entry;
  if (!verdict.valid) return ExclusionReason.NotValid;
  if (verdict.payload === undefined) return ExclusionReason.NoPayload;
  const spec = resource.spec;
  if (spec.isFallback === true && spec.isByokOnly === true) return ExclusionReason.FallbackAndByokOnly;
  if (spec.workspace !== undefined && !workspaceNames.has(spec.workspace)) return ExclusionReason.WorkspaceNotFound;
  for (const hash of spec.allowedApiKeyHashes ?? [])
    if (!liveHashes.has(hash)) return ExclusionReason.ApiKeyHashNotLive;
  return null;
}

function sortedUnique(values: readonly string[] | undefined): string[] | null {
  if (values === undefined) return null;
  return [...new Set(values)].sort(compareStrings);
}

export function compileAccount(snapshot: AccountSnapshot): CompiledAccount {
  const ns = snapshot.namespace;
  const guardrailNames = new Set(snapshot.guardrails.map((g) => g.metadata.name ?? ''));
  const workspaceNames = new Set(snapshot.workspaces.map((w) => w.metadata.name ?? ''));
  const guardrailId = (name: string | undefined): string | null =>
    name !== undefined && guardrailNames.has(name) ? publicId('Guardrail', ns, name) : null;
  const defaultWs = electDefaultWorkspace(snapshot.workspaces).winner;
  const defaultWsId = defaultWs ? publicId('Workspace', ns, defaultWs.metadata.name ?? '') : null;

  const workspaces: CompiledWorkspace[] = snapshot.workspaces
    .map((w): CompiledWorkspace => {
      const name = w.metadata.name ?? '';
      const budgets: BudgetLimit[] = [];
      for (const interval of INTERVALS) {
        const limit = w.spec.budgets?.[interval];
        if (typeof limit === 'number') budgets.push({ limitUsd: limit, interval });
      }
      const members = [...(w.spec.members ?? [])]
        .map((m) => ({ userId: m.userId, guardrailId: guardrailId(m.guardrail) }))
        .sort((a, b) => compareStrings(a.userId, b.userId));
      return {
        id: publicId('Workspace', ns, name),
        name,
        displayName: w.spec.displayName ?? null,
        isDefault: w === defaultWs,
        budgets,
        includeByokInBudgets: w.spec.includeByokInBudgets === true,
        defaultGuardrailId: guardrailId(w.spec.defaultGuardrail),
        members: dedupeBy(members, (m) => m.userId),
      };
    })
    .sort((a, b) => compareStrings(a.name, b.name));

  const guardrails: CompiledGuardrail[] = snapshot.guardrails
    .map((g): CompiledGuardrail => {
      const name = g.metadata.name ?? '';
      const b = g.spec.budget;
      const dp = g.spec.dataPolicy ?? {};
      return {
        id: publicId('Guardrail', ns, name),
        name,
        budget: b
          ? {
              limitUsd: b.limitUsd,
              resetInterval: b.resetInterval ?? DEFAULT_RESET_INTERVAL,
              includeByokInBudgets: b.includeByokInBudgets === true,
            }
          : null,
        dataPolicy: {
          requireZdr: dp.requireZdr === true,
          denyDataCollection: dp.denyDataCollection === true,
          allowedProviders: sortedUnique(dp.allowedProviders),
          ignoredProviders: sortedUnique(dp.ignoredProviders) ?? [],
        },
      };
    })
    .sort((a, b) => compareStrings(a.name, b.name));

  const apiKeys: CompiledApiKey[] = [];
  const liveHashes = new Set<string>();
  const keysInOrder = [...snapshot.apiKeys].sort(
    (a, b) => compareStrings(a.spec.hash, b.spec.hash) || compareStrings(a.metadata.name ?? '', b.metadata.name ?? ''),
  );
  for (const key of keysInOrder) {
    const hash = normalizeKeyHash(key.spec.hash);
    if (!isApiKeyLive(key.spec, snapshot.now.getTime()) || liveHashes.has(hash)) continue;
    // Another key (here or in another account) holds this hash: compiling it too would let the hash select two accounts.
    if (snapshot.conflictingApiKeys?.has(key.metadata.name ?? '')) continue;
    // A key scoped to a missing workspace has no determinable scope: leave it out (its filters stop resolving).
    if (key.spec.workspace !== undefined && !workspaceNames.has(key.spec.workspace)) continue;
    liveHashes.add(hash);
    const entry: CompiledApiKey = {
      hash,
      workspaceId: key.spec.workspace !== undefined ? publicId('Workspace', ns, key.spec.workspace) : defaultWsId,
      guardrailId: guardrailId(key.spec.guardrail),
      expiresAt: key.spec.expiresAt ?? null,
      // Emitted only when set, so keys without an owner compile to the same bytes as before the field existed.
      ...(key.spec.owner !== undefined ? { owner: key.spec.owner } : {}),
      name: key.metadata.name ?? '',
      ...(key.spec.models !== undefined ? { models: sortedUnique(key.spec.models) ?? [] } : {}),
      ...(key.spec.limits !== undefined && Object.keys(key.spec.limits).length > 0
        ? { limits: { ...key.spec.limits } }
        : {}),
    };
    apiKeys.push(entry);
    // The secret before a rotation: the same key under its old hash until the overlap ends (the earlier of that and
    // the key's own expiry), when the gateway refuses it per request and the next compile drops it.
    const previous = key.spec.previousHash !== undefined ? normalizeKeyHash(key.spec.previousHash) : null;
    const until = earlier(key.spec.previousHashExpiresAt, key.spec.expiresAt);
    if (
      previous !== null &&
      until !== null &&
      Date.parse(until) > snapshot.now.getTime() &&
      !liveHashes.has(previous) &&
      !snapshot.unheldPreviousHashes?.has(key.metadata.name ?? '')
    ) {
      liveHashes.add(previous);
      apiKeys.push({ ...entry, hash: previous, expiresAt: until });
    }
  }
  apiKeys.sort((a, b) => compareStrings(a.hash, b.hash));

  const credentials: CompiledCredential[] = [];
  for (const entry of snapshot.credentials) {
    if (credentialExclusion(entry, workspaceNames, liveHashes) !== null) continue;
    const { resource, verdict } = entry;
    const spec = resource.spec;
    const name = resource.metadata.name ?? '';
    credentials.push({
      id: publicId('BYOKCredential', ns, name),
      name,
      provider: spec.provider,
      workspaceId: spec.workspace !== undefined ? publicId('Workspace', ns, spec.workspace) : null,
      label: verdict.label ?? '',
      displayName: spec.displayName ?? null,
      disabled: spec.disabled === true,
      isFallback: spec.isFallback === true,
      isRequired: spec.isRequired === true,
      isByokOnly: spec.isByokOnly === true,
      declaredZdr: spec.declaredZdr ?? null,
      allowedModels: sortedUnique(spec.allowedModels),
      allowedApiKeyHashes: sortedUnique(spec.allowedApiKeyHashes),
      allowedUserIds: sortedUnique(spec.allowedUserIds),
      sortOrder: verdict.sortOrder,
      createdAt: resource.status?.createdAt ?? creationTime(resource.metadata),
    });
  }
  credentials.sort(compareCredentials);

  const plan = snapshot.account?.spec.plan ?? 'pay-as-you-go';
  const privacy = snapshot.account?.spec.privacy ?? {};
  return {
    namespace: ns,
    accountId: publicId('Account', ns, snapshot.account?.metadata.name ?? ns),
    plan,
    privacy: { denyDataCollection: privacy.denyDataCollection === true, alwaysZdr: privacy.alwaysZdr === true },
    credentials,
    workspaces,
    guardrails,
    apiKeys,
  };
}

/** The earlier of two RFC 3339 times (either may be absent); null when both are. */
function earlier(a: string | undefined, b: string | undefined): string | null {
  if (a === undefined) return b ?? null;
  if (b === undefined) return a;
  return Date.parse(a) <= Date.parse(b) ? a : b;
}

/** Provider, then section (prioritized before fallback), then sortOrder, then id (model.ts contract). */
export function compareCredentials(a: CompiledCredential, b: CompiledCredential): number {
  return (
    compareStrings(a.provider, b.provider) ||
    Number(a.isFallback) - Number(b.isFallback) ||
    a.sortOrder - b.sortOrder ||
    compareStrings(a.id, b.id)
  );
}

function dedupeBy<T>(items: T[], key: (t: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const k = key(item);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
