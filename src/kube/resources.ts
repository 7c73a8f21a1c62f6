// Typed informers for our five kinds and the credential Secrets, with the indexes both the operator and the
// REST API server look things up by. Index values are namespace-qualified ("ns/value"), but for the one index
// that looks across accounts (keyHolders).
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { hashesNamed } from '../domain/api-keys.ts';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../schema/generated/types.ts';
import { GROUP, VERSION } from '../schema/resources.ts';
import {
  compactForCache,
  type InformerOptions,
  keepingLastWriteTime,
  type RestartReason,
  SupervisedInformer,
} from './informer.ts';
import type { KubeAccess } from './kubeconfig.ts';

/** Set on every Secret a BYOKCredential references, so the operator can watch just those (see docs/operator.md). */
export const CREDENTIAL_SECRET_LABEL = 'byok.gateway.dev/credential-secret';
export const MANAGEMENT_KEY_LABEL = 'byok.gateway.dev/management-key';

export const crPath = (plural: string) => `/apis/${GROUP}/${VERSION}/${plural}`;
export const SECRETS_PATH = '/api/v1/secrets';

// Only the indexes a lookup uses: at 100k credentials each costs a string and a map entry per object.
export const INDEX = {
  /** BYOKCredential: "ns/secretName". */
  secret: 'secret',
  /** BYOKCredential: "ns/hash" for each allowedApiKeyHashes entry. GatewayAPIKey: "ns/hash". */
  apiKeyHash: 'apiKeyHash',
  /** BYOKCredential, GatewayAPIKey: "ns/workspaceName". */
  workspace: 'workspace',
  /** GatewayAPIKey: the hash alone (normalized), across namespaces: every account's key that names it. */
  keyHolders: 'keyHolders',
} as const;

export interface ResourceInformers {
  credentials: SupervisedInformer<BYOKCredential>;
  workspaces: SupervisedInformer<Workspace>;
  guardrails: SupervisedInformer<Guardrail>;
  apiKeys: SupervisedInformer<GatewayAPIKey>;
  accounts: SupervisedInformer<Account>;
  /** Only Secrets labelled CREDENTIAL_SECRET_LABEL=true. */
  secrets: SupervisedInformer<V1Secret>;
}

export interface ResourceInformerOptions {
  kubeConfig: KubeAccess;
  namespaces?: string[];
  logger?: Logger;
  resyncSeconds?: number;
  staleSeconds?: number;
  onRestart?: (informer: string, reason: RestartReason) => void;
  /** Cache transform for every informer (default compactForCache: no managedFields, no last-applied annotation,
   *  repeated strings shared). */
  transform?: InformerOptions['transform'];
}

export function createResourceInformers(opts: ResourceInformerOptions): ResourceInformers {
  const base = (name: string, path: string, extra: Partial<InformerOptions> = {}): InformerOptions => ({
    kubeConfig: opts.kubeConfig,
    path,
    name,
    ...(opts.namespaces ? { namespaces: opts.namespaces } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.resyncSeconds !== undefined ? { resyncSeconds: opts.resyncSeconds } : {}),
    ...(opts.staleSeconds !== undefined ? { staleSeconds: opts.staleSeconds } : {}),
    onRestart: (reason) => opts.onRestart?.(name, reason),
    transform: opts.transform ?? compactForCache,
    ...extra,
  });
  const credentials = new SupervisedInformer<BYOKCredential>(base('byokcredentials', crPath('byokcredentials')));
  const workspaces = new SupervisedInformer<Workspace>(base('workspaces', crPath('workspaces')));
  const guardrails = new SupervisedInformer<Guardrail>(base('guardrails', crPath('guardrails')));
  const apiKeys = new SupervisedInformer<GatewayAPIKey>(
    base('gatewayapikeys', crPath('gatewayapikeys'), {
      transform: keepingLastWriteTime(opts.transform ?? compactForCache),
    }),
  );
  const accounts = new SupervisedInformer<Account>(base('accounts', crPath('accounts')));
  const secrets = new SupervisedInformer<V1Secret>(
    base('credential-secrets', SECRETS_PATH, { labelSelector: `${CREDENTIAL_SECRET_LABEL}=true` }),
  );

  const ns = (o: { metadata?: { namespace?: string } }) => o.metadata?.namespace ?? '';
  credentials.addIndex(INDEX.secret, (c) => [`${ns(c)}/${c.spec?.secretRef?.name ?? ''}`]);
  credentials.addIndex(INDEX.apiKeyHash, (c) => (c.spec?.allowedApiKeyHashes ?? []).map((h) => `${ns(c)}/${h}`));
  credentials.addIndex(INDEX.workspace, (c) => (c.spec?.workspace ? [`${ns(c)}/${c.spec.workspace}`] : []));
  apiKeys.addIndex(INDEX.apiKeyHash, (k) => (k.spec?.hash ? [`${ns(k)}/${k.spec.hash}`] : []));
  // Both hashes of a rotated key: it holds its previous one too until the next rotation replaces it.
  apiKeys.addIndex(INDEX.keyHolders, (k) => hashesNamed(k));
  apiKeys.addIndex(INDEX.workspace, (k) => (k.spec?.workspace ? [`${ns(k)}/${k.spec.workspace}`] : []));
  return { credentials, workspaces, guardrails, apiKeys, accounts, secrets };
}

export async function startAll(informers: ResourceInformers): Promise<void> {
  await Promise.all(Object.values(informers).map((i: SupervisedInformer<never>) => i.start()));
}

export async function stopAll(informers: ResourceInformers): Promise<void> {
  await Promise.all(Object.values(informers).map((i: SupervisedInformer<never>) => i.stop()));
}

export { secretPayload, secretPayloadBytes, secretPayloadValue } from './secret-payload.ts';
