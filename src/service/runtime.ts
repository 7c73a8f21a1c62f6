// The service runtime both API doors serve from: the informers that fill the read model (ApiState), the one
// ByokService write path and the orphan Secret sweep. Started once per process and handed to each door, so either
// door runs alone or both share one cache and one write path. It starts in the background: a door can listen (and
// answer its liveness probe) while the caches fill, and reports ready only once they have synced.
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { EgressAllowList } from '../domain/egress.ts';
import { kubeClient } from '../kube/client.ts';
import { createInformer, keepingLastWriteTime, type SupervisedInformer, stripBulkyMetadata } from '../kube/informer.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import type { Account, BYOKCredential, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';
import { API_VERSION } from '../schema/resources.ts';
import { type Backend, kubeBackend } from './backend.ts';
import { REDACT_PATHS } from './limits.ts';
import { MANAGEMENT_KEY_SELECTOR } from './management-keys.ts';
import { startOrphanCollector } from './orphans.ts';
import { ApiState } from './read-model.ts';
import { ByokService } from './service.ts';

export interface ServiceRuntimeOptions {
  kubeConfig: KubeAccess;
  logger: Logger;
  /** Default true: writes to credentials not created through the API give 409. */
  gitopsGuard?: boolean;
  /** Serve only these account namespaces (and watch only them); all namespaces when absent. */
  watchNamespaces?: string[];
  /** Credentials per account when its Account sets no `spec.limits.maxCredentials`. Default 1000. */
  defaultMaxCredentials?: number;
  /** Age after which an unreferenced API-managed key Secret is deleted; false turns the collector off. Default 10 min. */
  orphanGraceMs?: number | false;
  /** What tenant URLs in payloads may point at beyond the egress policy (`--egress-allow`). */
  egress?: EgressAllowList;
}

export interface ServiceRuntime {
  state: ApiState;
  /** The one write path of both doors. */
  service: ByokService;
  backend: Backend;
  logger: Logger;
  /** True once every informer has listed (it never turns false again: later outages serve from the cache). */
  ready(): boolean;
  /** Resolves once ready(); rejects when the runtime is closed first. */
  whenSynced(): Promise<void>;
  close(): Promise<void>;
}

/** What either door answers (503, retry) before the caches have synced: nothing is known yet, not even who a key belongs to. */
export const NOT_SYNCED_MESSAGE = 'Caches are not synced yet';

const CRD_PATH = (plural: string) => `/apis/${API_VERSION}/${plural}`;

/** Informers feeding `state`; the credentials one is returned apart for read-your-writes. */
function startInformers(opts: ServiceRuntimeOptions, logger: Logger, state: ApiState) {
  // Cached objects drop managedFields and kubectl's last-applied annotation: the API never reads them.
  const common = {
    kubeConfig: opts.kubeConfig,
    logger,
    transform: stripBulkyMetadata,
    ...(opts.watchNamespaces ? { namespaces: opts.watchNamespaces } : {}),
  };
  const credentials: SupervisedInformer<BYOKCredential> = createInformer<BYOKCredential>({
    ...common,
    name: 'api-byokcredentials',
    path: CRD_PATH('byokcredentials'),
  });
  const workspaces = createInformer<Workspace>({ ...common, name: 'api-workspaces', path: CRD_PATH('workspaces') });
  const apiKeys = createInformer<GatewayAPIKey>({
    ...common,
    name: 'api-gatewayapikeys',
    path: CRD_PATH('gatewayapikeys'),
    transform: keepingLastWriteTime(stripBulkyMetadata),
  });
  const mgmtKeys = createInformer<V1Secret>({
    ...common,
    name: 'api-management-keys',
    path: '/api/v1/secrets',
    labelSelector: MANAGEMENT_KEY_SELECTOR,
  });
  const accounts = createInformer<Account>({ ...common, name: 'api-accounts', path: CRD_PATH('accounts') });

  credentials.on('add', (o) => state.upsertCredential(o));
  credentials.on('update', (o) => state.upsertCredential(o));
  credentials.on('delete', (o) => state.removeCredential(o));
  workspaces.on('add', (o) => state.upsertWorkspace(o));
  workspaces.on('update', (o) => state.upsertWorkspace(o));
  workspaces.on('delete', (o) => state.removeWorkspace(o));
  apiKeys.on('add', (o) => state.upsertApiKey(o));
  apiKeys.on('update', (o) => state.upsertApiKey(o));
  apiKeys.on('delete', (o) => state.removeApiKey(o));
  mgmtKeys.on('add', (o) => state.upsertManagementSecret(o));
  mgmtKeys.on('update', (o) => state.upsertManagementSecret(o));
  mgmtKeys.on('delete', (o) => state.removeManagementSecret(o));
  accounts.on('add', (o) => state.upsertAccount(o));
  accounts.on('update', (o) => state.upsertAccount(o));
  accounts.on('delete', (o) => state.removeAccount(o));

  const all = [credentials, workspaces, apiKeys, mgmtKeys, accounts];
  return { credentials, all, synced: Promise.all(all.map((i) => i.start())).then(() => undefined) };
}

/** Starts the informers and the sweep without waiting for them: see `whenSynced()`. */
export function startServiceRuntime(opts: ServiceRuntimeOptions): ServiceRuntime {
  // A caller's logger gets our redaction on top of its own.
  const logger = opts.logger.child({}, { redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } });
  const state = new ApiState();
  const informers = startInformers(opts, logger, state);
  // Rejected only by close() before the sync; handled here so that is never an unhandled rejection.
  informers.synced.catch(() => undefined);
  const ready = () => informers.all.every((i) => i.hasSynced());
  const backend = kubeBackend(kubeClient(opts.kubeConfig));
  const service = new ByokService({
    state,
    backend,
    observe: (o) => informers.credentials.observe(o),
    observeDeleted: (ns, name) => informers.credentials.observeDeleted(ns, name),
    gitopsGuard: opts.gitopsGuard ?? true,
    warn: (msg, fields) => logger.warn(fields, msg),
    ...(opts.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: opts.defaultMaxCredentials } : {}),
    ...(opts.egress ? { egress: opts.egress } : {}),
  });
  const collector =
    opts.orphanGraceMs === false
      ? undefined
      : startOrphanCollector({
          backend,
          state,
          ready,
          ...(opts.watchNamespaces ? { namespaces: opts.watchNamespaces } : {}),
          ...(opts.orphanGraceMs !== undefined ? { graceMs: opts.orphanGraceMs } : {}),
          onResult: (r) => {
            if (r.deleted.length > 0)
              logger.info({ deleted: r.deleted, scanned: r.scanned }, 'removed unreferenced key Secrets');
          },
          onError: (err) =>
            logger.warn(
              { code: (err as { status?: number }).status, err: (err as Error).message },
              'orphan Secret sweep failed',
            ),
        });
  let closed: Promise<void> | undefined;
  return {
    state,
    service,
    backend,
    logger,
    ready,
    whenSynced: () => informers.synced,
    close: () =>
      (closed ??= (async () => {
        collector?.stop();
        await Promise.allSettled(informers.all.map((i) => i.stop()));
      })()),
  };
}
