// BYOKCredential (CRD, camelCase) → BYOKKey (REST, snake_case). Pure functions, unit-tested.

import type { CredentialSettings } from '../domain/filters.ts';
import { publicId } from '../domain/ids.ts';
import type { ProviderSlug } from '../domain/providers.ts';
import { ConditionType, PendingReason } from '../schema/conditions.ts';
import type { BYOKCredential, Condition } from '../schema/generated/types.ts';

/** Spec 2.1's credential on the wire; the routing settings are the domain's, under the same REST names. */
export interface BYOKKey extends CredentialSettings {
  id: string;
  provider: ProviderSlug;
  workspace_id: string | null;
  label: string;
  name: string | null;
  disabled: boolean;
  sort_order: number;
  created_at: string;
  declared_zdr: boolean | null;
  /** Extension beyond the public API (read-only): what the operator and the gateways report about this credential. */
  status: BYOKKeyStatus;
}

/**
 * Health and readiness of a credential, from the BYOKCredential's status (docs/api.md, "`status`"). Every field is
 * always present; null means "not known (yet)". Messages are the operator's, which never quote key material.
 */
export interface BYOKKeyStatus {
  /** Ready condition for the current generation: true, false, or null (not reconciled yet, or Unknown). */
  ready: boolean | null;
  /** Ready's reason (PayloadInvalid, KeyNotFound, ...); `Reconciling` while the operator has not seen this generation. */
  reason: string | null;
  message: string | null;
  /** UpstreamHealthy's reason: Serving, Unauthorized, RateLimited, UpstreamErrors, Unused, Inconclusive; null before any report. */
  upstream: string | null;
  /** Last time a gateway used the credential upstream (status.lastUsedTime), ISO 8601. */
  last_used_at: string | null;
  /** Delivered condition for the current generation: every gateway pod has loaded delivered_version. */
  delivered: boolean | null;
  /** status.delivery.configVersion: the credential's current sealed version the operator delivers to gateway pods. */
  delivered_version: string | null;
}

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_API = 'byok-api';
/** The label computed by the API at write time, so reads show it before the operator reconciles. */
export const LABEL_ANNOTATION = 'byok.gateway.dev/label';
/** resourceVersion of the Secret that LABEL_ANNOTATION was computed from. */
export const LABEL_SECRET_VERSION_ANNOTATION = 'byok.gateway.dev/label-secret-version';

export function isManagedByApi(obj: { metadata?: { labels?: Record<string, string> } | undefined }): boolean {
  return obj.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_API;
}

export function credentialId(obj: BYOKCredential): string {
  return obj.status?.id ?? publicId('BYOKCredential', obj.metadata.namespace ?? '', obj.metadata.name ?? '');
}

function versionNumber(v: string | undefined): bigint | undefined {
  return v !== undefined && /^\d+$/.test(v) ? BigInt(v) : undefined;
}

/**
 * The label to show. The operator's status.label wins unless the API computed a label from a newer Secret
 * revision (a rotation the operator has not reconciled yet): both record the Secret's resourceVersion.
 * Empty until either has run (a Git-created credential before the operator reconciles it).
 */
export function pickLabel(obj: BYOKCredential): string {
  const status = obj.status?.label;
  const annotated = obj.metadata.annotations?.[LABEL_ANNOTATION];
  if (annotated === undefined) return status ?? '';
  if (status === undefined) return annotated;
  const a = versionNumber(obj.metadata.annotations?.[LABEL_SECRET_VERSION_ANNOTATION]);
  const s = versionNumber(obj.status?.secretResourceVersion);
  return a !== undefined && (s === undefined || a > s) ? annotated : status;
}

/** Effective sort order: the operator's value once it has seen this generation, else the spec (our own write). */
export function effectiveSortOrder(obj: BYOKCredential): number {
  const st = obj.status;
  const fresh = st?.observedGeneration !== undefined && st.observedGeneration === obj.metadata.generation;
  return (fresh ? (st?.sortOrder ?? obj.spec.sortOrder) : (obj.spec.sortOrder ?? st?.sortOrder)) ?? 0;
}

function isoTime(v: unknown): string {
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'string' && v !== '') {
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? v : d.toISOString();
  }
  return new Date(0).toISOString();
}

const list = (v: string[] | undefined): string[] | null => (v === undefined ? null : [...v]);

/** Reason shown while the operator has not reconciled the credential's current generation. */
export const RECONCILING = PendingReason.Reconciling;

function conditionOf(obj: BYOKCredential, type: string): Condition | undefined {
  return obj.status?.conditions?.find((c) => c.type === type);
}

/** A condition written for an older generation describes a spec that no longer exists (what kubectl wait ignores too). */
function isCurrent(obj: BYOKCredential, c: Condition): boolean {
  const gen = obj.metadata.generation;
  return c.observedGeneration === undefined || gen === undefined || c.observedGeneration >= gen;
}

const bool = (s: string): boolean | null => (s === 'True' ? true : s === 'False' ? false : null);

function isoOrNull(v: unknown): string | null {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
  if (typeof v !== 'string' || v === '') return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/** The credential's health and readiness, from the status the operator writes (pure; docs/api.md, "`status`"). */
export function credentialStatus(obj: BYOKCredential): BYOKKeyStatus {
  const ready = conditionOf(obj, ConditionType.Ready);
  const upstream = conditionOf(obj, ConditionType.UpstreamHealthy);
  const delivered = conditionOf(obj, ConditionType.Delivered);
  let head: Pick<BYOKKeyStatus, 'ready' | 'reason' | 'message'>;
  if (!ready) {
    head = { ready: null, reason: RECONCILING, message: 'not reconciled by the operator yet' };
  } else if (!isCurrent(obj, ready)) {
    head = {
      ready: null,
      reason: RECONCILING,
      message: `the operator has not reconciled generation ${obj.metadata.generation} yet (generation ${ready.observedGeneration} was Ready=${ready.status} ${ready.reason})`,
    };
  } else {
    head = { ready: bool(ready.status), reason: ready.reason || null, message: ready.message || null };
  }
  return {
    ...head,
    upstream: upstream?.reason || null,
    last_used_at: isoOrNull(obj.status?.lastUsedTime),
    delivered: delivered && isCurrent(obj, delivered) ? bool(delivered.status) : null,
    delivered_version: obj.status?.delivery?.configVersion || null,
  };
}

export function toByokKey(obj: BYOKCredential): BYOKKey {
  const ns = obj.metadata.namespace ?? '';
  const spec = obj.spec;
  return {
    id: credentialId(obj),
    provider: spec.provider,
    workspace_id: spec.workspace === undefined ? null : publicId('Workspace', ns, spec.workspace),
    label: pickLabel(obj),
    name: spec.displayName ?? null,
    disabled: spec.disabled ?? false,
    is_fallback: spec.isFallback ?? false,
    is_required: spec.isRequired ?? false,
    is_byok_only: spec.isByokOnly ?? false,
    allowed_models: list(spec.allowedModels),
    allowed_api_key_hashes: list(spec.allowedApiKeyHashes),
    allowed_user_ids: list(spec.allowedUserIds),
    sort_order: effectiveSortOrder(obj),
    created_at: isoTime(obj.metadata.creationTimestamp ?? obj.status?.createdAt),
    declared_zdr: spec.declaredZdr ?? null,
    status: credentialStatus(obj),
  };
}

/** The fields the list order is decided on (and all a list cursor has to carry). */
export interface KeyOrder {
  provider: string;
  is_fallback: boolean;
  sort_order: number;
  created_at: string;
  id: string;
}

/** List order: provider, then section (prioritized before fallback), then sort_order, then creation, then id. */
export function compareKeys(a: KeyOrder, b: KeyOrder): number {
  if (a.provider !== b.provider) return a.provider < b.provider ? -1 : 1;
  if (a.is_fallback !== b.is_fallback) return a.is_fallback ? 1 : -1;
  if (a.sort_order !== b.sort_order) return a.sort_order - b.sort_order;
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
