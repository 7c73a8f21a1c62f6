// The five operations, independent of HTTP: reads from the read model, writes through the Backend, and every
// write observed back into the read model before responding (read-your-writes).

import { randomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { canonicalJson } from '../contract/canonical-json.ts';
import { sha256Hex } from '../contract/routing.ts';
import type { EgressAllowList } from '../domain/egress.ts';
import {
  type CredentialPatch,
  type CredentialSettings,
  resolveCredentialWrite,
  SPEC_FIELD_NAMES,
} from '../domain/filters.ts';
import { maskLabel } from '../domain/label.ts';
import type { ProviderSlug } from '../domain/providers.ts';
import { DEFAULT_MAX_CREDENTIALS } from '../domain/quota.ts';
import { KubeApiError } from '../kube/client.ts';
import { CREDENTIAL_SECRET_LABEL } from '../kube/resources.ts';
import { ApiErrorReason } from '../schema/conditions.ts';
import type { BYOKCredential, BYOKCredentialSpec } from '../schema/generated/types.ts';
import type { Backend } from './backend.ts';
import { ApiError, badRequest, MESSAGES } from './errors.ts';
import {
  type BYOKKey,
  LABEL_ANNOTATION,
  LABEL_SECRET_VERSION_ANNOTATION,
  MANAGED_BY_API,
  MANAGED_BY_LABEL,
} from './mapping.ts';
import type { ApiState, CredentialEntry } from './read-model.ts';
import { checkCreateBody, checkPayload, checkUpdateBody, isUuid, parseListQuery, violationsError } from './validate.ts';

export const SECRET_DATA_KEY = 'key';

export interface ServiceDeps {
  state: ApiState;
  backend: Backend;
  /** Applies a write response to the caches (the informer's observe), which updates `state`. */
  observe(obj: BYOKCredential): void;
  observeDeleted(namespace: string, name: string): void;
  gitopsGuard: boolean;
  /** Non-fatal problems (a best-effort cleanup that failed). Never receives key material. */
  warn(msg: string, fields: Record<string, unknown>): void;
  /** Credentials per account when the Account sets no `spec.limits.maxCredentials`. Default 1000. */
  defaultMaxCredentials?: number;
  /** How long an Idempotency-Key replays its create. Default 24 h. */
  idempotencyWindowMs?: number;
  /** Delay before a rotated-out Secret is deleted. Default 5 s. */
  rotatedSecretDeleteDelayMs?: number;
  /** What tenant URLs in payloads may point at beyond the egress policy (docs/gateway.md, "Egress policy"). */
  egress?: EgressAllowList;
}

/** Options of one create call (added at the end so both doors keep the same signature). */
export interface CreateOptions {
  /** The client's Idempotency-Key header: a retry with the same key and body returns the same credential. */
  idempotencyKey?: string;
}

export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;
/** sha256(key + body) of the create an Idempotency-Key was first used for; the key itself is never stored. */
export const IDEMPOTENCY_ANNOTATION = 'byok.gateway.dev/idempotency-fingerprint';
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const ROTATED_SECRET_DELETE_DELAY_MS = 5000;
/** Seconds a client should wait after a 503 (backend unavailable). */
export const RETRY_AFTER_SECONDS = 5;

/** The six routing settings: REST wire name → CRD spec field (the domain's one mapping). */
const SETTINGS = Object.entries(SPEC_FIELD_NAMES) as [keyof CredentialSettings, string][];

function settingsOf(k: BYOKKey): CredentialSettings {
  return {
    is_fallback: k.is_fallback,
    is_required: k.is_required,
    is_byok_only: k.is_byok_only,
    allowed_models: k.allowed_models,
    allowed_api_key_hashes: k.allowed_api_key_hashes,
    allowed_user_ids: k.allowed_user_ids,
  };
}

function pickPatch(body: Record<string, unknown>): CredentialPatch {
  const out: Record<string, unknown> = {};
  for (const [f] of SETTINGS) if (body[f] !== undefined) out[f] = body[f];
  return out as CredentialPatch;
}

export const unavailable = (): ApiError =>
  new ApiError(
    503,
    MESSAGES.backendUnavailable,
    { retry_after_seconds: RETRY_AFTER_SECONDS },
    { 'retry-after': String(RETRY_AFTER_SECONDS) },
  );

/** A transport failure or timeout talking to the apiserver (not an answer from it). */
function isTransportError(err: unknown): boolean {
  // Duck-typed: socket errors may come from another realm (instanceof Error is not reliable there).
  if (typeof err !== 'object' || err === null || err instanceof KubeApiError || err instanceof ApiError) return false;
  const { code, message, name } = err as { code?: unknown; message?: unknown; name?: unknown };
  return (
    (typeof code === 'string' && /^(E[A-Z]+|UND_ERR.*|ABORT_ERR)$/.test(code)) ||
    (typeof message === 'string' && / timed out after /.test(message)) ||
    name === 'AbortError'
  );
}

/** Whether the apiserver may have applied a write whose answer we did not get (timeout, reset, 5xx). */
function outcomeUnknown(err: unknown): boolean {
  return isTransportError(err) || (err instanceof KubeApiError && err.status >= 500);
}

/** Maps apiserver failures of our own writes onto the REST error vocabulary. */
function fromKube(err: unknown): unknown {
  if (isTransportError(err)) return unavailable();
  if (!(err instanceof KubeApiError)) return err;
  if (err.status === 404) return new ApiError(404, MESSAGES.notFound);
  if (err.status === 409) return new ApiError(409, MESSAGES.conflict);
  // The CRD's own validation (CEL, bounds) is the last line: its message names the spec field.
  if (err.status === 422 || err.status === 400)
    return badRequest(`Rejected by the Kubernetes API: ${err.body?.message ?? 'invalid object'}`);
  // etcd down, apiserver overloaded or shutting down: the client should retry.
  if (err.status === 429 || err.status >= 500) return unavailable();
  return err;
}

/**
 * Sort orders handed out to creates still in flight, per account+provider. Concurrent POSTs on this replica each
 * get a distinct "next free position" without waiting for one another; once none is in flight the read model
 * (which then holds them all) is the only source again, so a deleted tail position is reused.
 */
class SortOrderReservations {
  private readonly pending = new Map<string, { inflight: number; last: number }>();

  reserve(key: string, nextFromCache: number): number {
    const p = this.pending.get(key);
    if (!p) {
      this.pending.set(key, { inflight: 1, last: nextFromCache });
      return nextFromCache;
    }
    p.inflight++;
    p.last = Math.max(nextFromCache, p.last + 1);
    return p.last;
  }

  release(key: string): void {
    const p = this.pending.get(key);
    if (p && --p.inflight === 0) this.pending.delete(key);
  }
}

interface Idempotency {
  /** The credential's metadata.name, derived from the account and the key. */
  name: string;
  fingerprint: string;
}

export class ByokService {
  private readonly d: ServiceDeps;
  private readonly sortOrders = new SortOrderReservations();

  constructor(deps: ServiceDeps) {
    this.d = deps;
  }

  /** The encoded list page, assembled from the per-credential JSON cached in the read model. */
  list(namespace: string, query: unknown): Buffer {
    const q = parseListQuery(query);
    let workspaceName: string;
    if (q.workspaceId !== undefined) {
      const ws = this.d.state.workspaceById(namespace, q.workspaceId);
      if (!ws) throw badRequest(MESSAGES.unknownWorkspace, { field: 'workspace_id' });
      workspaceName = ws.metadata.name ?? '';
    } else {
      const ws = this.d.state.defaultWorkspace(namespace);
      if (!ws) throw badRequest(MESSAGES.defaultWorkspaceMissing, { field: 'workspace_id' });
      workspaceName = ws.metadata.name ?? '';
    }
    return this.d.state.listPage(namespace, workspaceName, q.provider, q.offset, q.limit);
  }

  get(namespace: string, id: string): CredentialEntry {
    const e = isUuid(id) ? this.d.state.credentialById(namespace, id.toLowerCase()) : undefined;
    if (!e) throw new ApiError(404, MESSAGES.notFound);
    return e;
  }

  async create(namespace: string, raw: unknown, opts: CreateOptions = {}): Promise<CredentialEntry> {
    const body = checkCreateBody(raw);
    checkPayload(body.provider, body.key, this.d.egress);

    let idem: Idempotency | undefined;
    if (opts.idempotencyKey !== undefined) {
      if (!IDEMPOTENCY_KEY.test(opts.idempotencyKey))
        throw badRequest(MESSAGES.badIdempotencyKey, { field: 'Idempotency-Key' });
      // The name is derived from the key, so two replicas racing on one retry meet at the apiserver: one
      // create wins and the other replays it. The fingerprint is salted with the key, which is not stored.
      idem = {
        name: `byok-${sha256Hex(`${namespace}\u0000${opts.idempotencyKey}`).slice(0, 20)}`,
        fingerprint: sha256Hex(`${opts.idempotencyKey}\u0000${canonicalJson(body)}`),
      };
      const seen = this.d.state.credential(namespace, idem.name);
      if (seen) return this.replay(seen, idem);
    }

    const limit = this.d.state.credentialLimit(namespace) ?? this.d.defaultMaxCredentials ?? DEFAULT_MAX_CREDENTIALS;
    const count = this.d.state.credentialCount(namespace);
    if (count >= limit) {
      throw new ApiError(403, MESSAGES.quotaExceeded, {
        reason: ApiErrorReason.QuotaExceeded,
        limit: 'maxCredentials',
        max_credentials: limit,
        credentials: count,
      });
    }

    let workspace: string | undefined;
    if (body.workspace_id === null) {
      workspace = undefined; // explicit null: a global credential
    } else if (body.workspace_id !== undefined) {
      const ws = this.d.state.workspaceById(namespace, body.workspace_id.toLowerCase());
      if (!ws) throw badRequest(MESSAGES.unknownWorkspace, { field: 'workspace_id' });
      workspace = ws.metadata.name;
    } else {
      const ws = this.d.state.defaultWorkspace(namespace);
      if (!ws) throw badRequest(MESSAGES.defaultWorkspaceMissing, { field: 'workspace_id' });
      workspace = ws.metadata.name;
    }

    const resolved = resolveCredentialWrite({
      mode: 'create',
      stored: null,
      patch: pickPatch(body as Record<string, unknown>),
      liveApiKeyHashes: this.d.state.liveApiKeyHashes(namespace),
    });
    if (!resolved.ok) throw violationsError(resolved.violations);
    const s = resolved.settings;

    const reservation = `${namespace}/${body.provider}`;
    const sortOrder = this.sortOrders.reserve(reservation, this.d.state.nextSortOrder(namespace, body.provider));
    try {
      return await this.write(namespace, body, workspace, s, sortOrder, idem);
    } finally {
      this.sortOrders.release(reservation);
    }
  }

  /** A create retried with the same Idempotency-Key: the same credential if the body matches and the window is open. */
  private replay(entry: CredentialEntry, idem: Idempotency): CredentialEntry {
    const stored = entry.obj.metadata.annotations?.[IDEMPOTENCY_ANNOTATION];
    const created = Date.parse(String(entry.obj.metadata.creationTimestamp ?? ''));
    const window = this.d.idempotencyWindowMs ?? IDEMPOTENCY_WINDOW_MS;
    if (stored === undefined || stored !== idem.fingerprint) {
      throw new ApiError(422, MESSAGES.idempotencyMismatch, {
        field: 'Idempotency-Key',
        reason: ApiErrorReason.IdempotencyKeyReused,
      });
    }
    if (!Number.isNaN(created) && Date.now() - created > window) {
      throw new ApiError(422, MESSAGES.idempotencyExpired, {
        field: 'Idempotency-Key',
        reason: ApiErrorReason.IdempotencyKeyExpired,
        window_seconds: Math.round(window / 1000),
      });
    }
    return entry;
  }

  private async write(
    namespace: string,
    body: ReturnType<typeof checkCreateBody>,
    workspace: string | undefined,
    s: CredentialSettings,
    sortOrder: number,
    idem: Idempotency | undefined,
  ): Promise<CredentialEntry> {
    const name = idem?.name ?? `byok-${randomBytes(5).toString('hex')}`;
    const secretName = `${name}-key-${randomBytes(3).toString('hex')}`;
    const label = maskLabel(body.provider, body.key);
    const managed = { [MANAGED_BY_LABEL]: MANAGED_BY_API };

    const secret = await this.createKeySecret(namespace, secretName, body.key);

    const spec: BYOKCredentialSpec = {
      provider: body.provider,
      secretRef: { name: secretName, key: SECRET_DATA_KEY },
      ...(workspace !== undefined ? { workspace } : {}),
      ...(typeof body.name === 'string' ? { displayName: body.name } : {}),
      disabled: body.disabled ?? false,
      isFallback: s.is_fallback,
      isRequired: s.is_required,
      isByokOnly: s.is_byok_only,
      ...(typeof body.declared_zdr === 'boolean' ? { declaredZdr: body.declared_zdr } : {}),
      ...(s.allowed_models ? { allowedModels: s.allowed_models } : {}),
      ...(s.allowed_api_key_hashes ? { allowedApiKeyHashes: s.allowed_api_key_hashes } : {}),
      ...(s.allowed_user_ids ? { allowedUserIds: s.allowed_user_ids } : {}),
      sortOrder,
    };
    let created: BYOKCredential;
    try {
      created = await this.d.backend.createCredential(namespace, {
        apiVersion: 'byok.gateway.dev/v1alpha1',
        kind: 'BYOKCredential',
        metadata: {
          name,
          namespace,
          labels: managed,
          annotations: {
            [LABEL_ANNOTATION]: label,
            [LABEL_SECRET_VERSION_ANNOTATION]: secret.metadata?.resourceVersion ?? '',
            ...(idem ? { [IDEMPOTENCY_ANNOTATION]: idem.fingerprint } : {}),
          },
        },
        spec,
      });
    } catch (err) {
      // When the create may have happened (timeout), the Secret may be referenced: the orphan collector decides later.
      if (!outcomeUnknown(err))
        await this.dropSecret(namespace, secretName, 'could not remove the Secret of a failed create');
      if (idem && err instanceof KubeApiError && err.status === 409) {
        // Another request with the same Idempotency-Key (on this or another replica) created it first.
        const winner = await this.d.backend.getCredential(namespace, idem.name).catch((e: unknown) => {
          throw fromKube(e);
        });
        if (winner) {
          this.d.observe(winner);
          return this.replay(this.entryAfterWrite(winner), idem);
        }
      }
      throw fromKube(err);
    }
    this.d.observe(created);
    this.adoptSecret(namespace, secretName, created);
    return this.entryAfterWrite(created);
  }

  async update(namespace: string, id: string, raw: unknown): Promise<CredentialEntry> {
    let entry = this.get(namespace, id);
    const body = checkUpdateBody(raw);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.updateOnce(namespace, entry, body);
      } catch (err) {
        // Our cached copy was stale (resourceVersion precondition failed): reload it and validate again.
        if (!(err instanceof KubeApiError && err.status === 409) || attempt >= 2) throw fromKube(err);
        const fresh = await this.d.backend.getCredential(namespace, entry.name).catch((e: unknown) => {
          throw fromKube(e);
        });
        if (!fresh) {
          this.d.observeDeleted(namespace, entry.name);
          throw new ApiError(404, MESSAGES.notFound);
        }
        this.d.observe(fresh);
        entry = this.entryAfterWrite(fresh);
      }
    }
  }

  private async updateOnce(
    namespace: string,
    entry: CredentialEntry,
    body: ReturnType<typeof checkUpdateBody>,
  ): Promise<CredentialEntry> {
    this.guard(entry);
    const current = entry.key;
    if (body.provider !== undefined && body.provider !== current.provider) {
      throw badRequest('provider cannot be changed: create a new credential instead', { field: 'provider' });
    }
    if (
      body.workspace_id !== undefined &&
      (body.workspace_id === null ? null : body.workspace_id.toLowerCase()) !== current.workspace_id
    ) {
      throw badRequest('workspace_id cannot be changed: create a new credential instead', { field: 'workspace_id' });
    }
    // Echoing the masked label back (a client that round-trips what it read) must never become the secret.
    const rotate = body.key !== undefined && body.key !== current.label && body.key.trim() !== current.label;
    if (rotate) checkPayload(current.provider, body.key as string, this.d.egress);

    const resolved = resolveCredentialWrite({
      mode: 'update',
      stored: settingsOf(current),
      patch: pickPatch(body as Record<string, unknown>),
      liveApiKeyHashes: this.d.state.liveApiKeyHashes(namespace),
    });
    if (!resolved.ok) throw violationsError(resolved.violations);
    const s = resolved.settings;

    const spec: Record<string, unknown> = {};
    // A filter set to null in a merge patch removes the field: absent means no restriction.
    for (const [wire, camel] of SETTINGS) if (body[wire] !== undefined) spec[camel] = s[wire];
    if (body.name !== undefined) spec.displayName = body.name;
    if (body.disabled !== undefined) spec.disabled = body.disabled;
    if (body.declared_zdr !== undefined) spec.declaredZdr = body.declared_zdr;
    if (body.sort_order !== undefined) spec.sortOrder = body.sort_order;

    const annotations: Record<string, string> = {};
    // A rotation writes the new key into a new Secret and repoints the credential at it with a resourceVersion
    // precondition: the credential patch is the commit point. A refused patch leaves the old Secret, still the
    // referenced one, untouched; the new Secret is then removed (or, when the outcome is unknown, left to the
    // orphan collector). Holds across replicas and both doors: etcd decides, not a lock in one process.
    let newSecret: string | undefined;
    if (rotate) {
      const key = body.key as string;
      newSecret = `${entry.name}-key-${randomBytes(3).toString('hex')}`;
      const secret = await this.createKeySecret(namespace, newSecret, key);
      spec.secretRef = { name: newSecret, key: SECRET_DATA_KEY };
      annotations[LABEL_ANNOTATION] = maskLabel(current.provider, key);
      annotations[LABEL_SECRET_VERSION_ANNOTATION] = secret.metadata?.resourceVersion ?? '';
    }

    if (Object.keys(spec).length === 0 && Object.keys(annotations).length === 0) return entry;
    const patch = {
      metadata: {
        resourceVersion: entry.obj.metadata.resourceVersion,
        ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      },
      ...(Object.keys(spec).length > 0 ? { spec } : {}),
    };
    let updated: BYOKCredential;
    try {
      updated = await this.d.backend.patchCredential(namespace, entry.name, patch);
    } catch (err) {
      if (newSecret !== undefined && !outcomeUnknown(err))
        await this.dropSecret(namespace, newSecret, 'could not remove the Secret of a refused rotation');
      throw err;
    }
    this.d.observe(updated);
    if (newSecret !== undefined) {
      this.adoptSecret(namespace, newSecret, updated);
      // The old key is no longer referenced; only a Secret the API created is the API's to delete. A short
      // delay lets the operator see the repointed credential before the old Secret's delete event, so it
      // never reconciles the old spec against a missing Secret (a spurious SecretNotFound and routing gap).
      // A crash in between leaves it to the orphan collector.
      const old = entry.obj.spec.secretRef.name;
      if (entry.managedByApi && old !== newSecret) {
        setTimeout(
          () => void this.dropSecret(namespace, old, 'could not remove the Secret of a rotated key'),
          this.d.rotatedSecretDeleteDelayMs ?? ROTATED_SECRET_DELETE_DELAY_MS,
        ).unref();
      }
    }
    return this.entryAfterWrite(updated);
  }

  private async createKeySecret(namespace: string, name: string, key: string): Promise<V1Secret> {
    try {
      return await this.d.backend.createSecret(namespace, {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name,
          namespace,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY_API, [CREDENTIAL_SECRET_LABEL]: 'true' },
        },
        data: { [SECRET_DATA_KEY]: Buffer.from(key, 'utf8').toString('base64') },
      });
    } catch (err) {
      throw fromKube(err);
    }
  }

  /** Best-effort delete that never throws; what it misses, the orphan collector removes. */
  private dropSecret(namespace: string, name: string, problem: string): Promise<void> {
    return this.d.backend.deleteSecret(namespace, name).catch((err: unknown) => {
      if (!(err instanceof KubeApiError && err.status === 404))
        this.d.warn(problem, { namespace, secret: name, code: (err as { status?: number }).status });
    });
  }

  /**
   * The checks delete makes before it writes (the credential exists in this account, and this API may delete it),
   * without writing: lets a collection delete refuse as a whole before removing anything.
   */
  deletable(namespace: string, id: string): CredentialEntry {
    const entry = this.get(namespace, id);
    this.guard(entry);
    return entry;
  }

  async delete(namespace: string, id: string): Promise<void> {
    const entry = this.deletable(namespace, id);
    try {
      await this.d.backend.deleteCredential(namespace, entry.name);
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) {
        this.d.observeDeleted(namespace, entry.name);
        throw new ApiError(404, MESSAGES.notFound);
      }
      throw fromKube(err);
    }
    this.d.observeDeleted(namespace, entry.name);
    // Only a Secret the API created is the API's to delete; a Git-managed credential's Secret stays with Git.
    if (entry.managedByApi) {
      await this.d.backend.deleteSecret(namespace, entry.obj.spec.secretRef.name).catch((err: unknown) => {
        if (!(err instanceof KubeApiError && err.status === 404)) {
          this.d.warn('credential deleted but its Secret could not be', {
            namespace,
            secret: entry.obj.spec.secretRef.name,
            code: (err as { status?: number }).status,
          });
        }
      });
    }
  }

  private guard(entry: CredentialEntry): void {
    if (this.d.gitopsGuard && !entry.managedByApi)
      throw new ApiError(409, MESSAGES.gitManaged, {
        managed_by: entry.obj.metadata.labels?.[MANAGED_BY_LABEL] ?? null,
      });
  }

  private entryAfterWrite(obj: BYOKCredential): CredentialEntry {
    const ns = obj.metadata.namespace ?? '';
    const name = obj.metadata.name ?? '';
    const e = this.d.state.credential(ns, name);
    // The observe may be a no-op when the watch already delivered something newer; either way the cache has it.
    if (e) return e;
    this.d.observe(obj);
    const again = this.d.state.credential(ns, name);
    if (!again) throw new Error('credential not in the read model after the write');
    return again;
  }

  /** Owner reference from the Secret to its credential, so deleting the credential with kubectl also removes the Secret. Best effort, off the request path. */
  private adoptSecret(namespace: string, secretName: string, owner: BYOKCredential): void {
    const uid = owner.metadata.uid;
    if (!uid) return;
    this.d.backend
      .patchSecret(namespace, secretName, {
        metadata: {
          ownerReferences: [
            {
              apiVersion: 'byok.gateway.dev/v1alpha1',
              kind: 'BYOKCredential',
              name: owner.metadata.name,
              uid,
              blockOwnerDeletion: false,
            },
          ],
        },
      })
      .catch((err: unknown) =>
        this.d.warn('could not set the owner reference of a credential Secret', {
          namespace,
          secret: secretName,
          code: (err as { status?: number }).status,
        }),
      );
  }
}

export type { ProviderSlug };
