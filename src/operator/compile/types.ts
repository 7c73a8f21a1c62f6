// Contract between the reconcilers (src/operator/**) and the compile pipeline (this folder): its types, in a
// file of their own so the pipeline's parts (scheduler, keyring, quarantine, accounts, writer) and pipeline.ts,
// which assembles them, all import them without an import cycle. pipeline.ts re-exports them.
// The reconcilers call markDirty(namespace) whenever anything an account's routing depends on changes
// (any of the five kinds, a referenced Secret, a verdict); the pipeline coalesces, compiles from
// source.snapshot(), and writes only the changed shard ConfigMaps / bundle Secrets, then the index.

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { BundleShardOptions } from '../../bundle/bundle.ts';
import type { ShardOptions } from '../../compiler/shard.ts';
import type { AccountSnapshot } from '../../compiler/snapshot.ts';
import type { CompiledAccount } from '../../domain/compiled.ts';
import type { Applier } from '../../kube/apply.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import type { RoutingStore } from './store.ts';

export type { AccountSnapshot, CredentialVerdict, SnapshotCredential } from '../../compiler/snapshot.ts';

export interface AccountStateSource {
  /** Every namespace that currently is an account (holds an Account: the gate); read from caches. */
  accountNamespaces(): string[];
  /** Whether one namespace is an account, without listing them all (a compile run checks only its dirty ones). */
  isAccountNamespace?(namespace: string): boolean;
  /** Current cached state of one account namespace. Must not do I/O; must be cheap (called per dirty account). */
  snapshot(namespace: string): AccountSnapshot;
}

export interface CompilePipelineOptions {
  kubeConfig: KubeAccess;
  /** Namespace that holds byok-routing-* ConfigMaps, byok-bundle-* Secrets and the bundle key Secret. */
  routingNamespace: string;
  source: AccountStateSource;
  logger: Logger;
  /** Metrics go here (default: a private Registry). */
  registry?: Registry;
  /** Dirty accounts are collected for this long before a compile (default 20 ms). */
  coalesceMs?: number;
  /** Secret holding the bundle data keys (default 'byok-bundle-key'); created when absent. */
  bundleKeySecretName?: string;
  /** Writer to use (e.g. one fenced by leader election); default createApplier(kubeConfig). */
  applier?: Applier;
  /** Replaces the apiserver store entirely (unit tests). */
  store?: RoutingStore;
  /** Re-read the bundle key Secret at most this often, so a rotation is picked up (default 10 s). */
  keyReloadMs?: number;
  /** Read the bundle key Secret on this timer too, so an activation reseals with nothing else changing (default 4 s). */
  keyPollMs?: number;
  shardOptions?: Omit<ShardOptions, 'previousBuckets' | 'cache'>;
  bundleShardOptions?: Omit<BundleShardOptions, 'previousBuckets' | 'cache'>;
  /** Cap of the wait between back-to-back runs while changes keep arriving (default 1000 ms); see scheduler.ts. */
  maxBatchDelayMs?: number;
  /**
   * True while the reconcilers are backed up (a cold start, a mass rotation): the next run then waits until it
   * turns false (or backlogDelayMs), so each shard and bundle Secret is rewritten a few times, not every second.
   */
  backlog?: () => boolean;
  /** The longest wait between runs while backlog() holds (default 30000 ms). */
  backlogDelayMs?: number;
  /** Parallel writes per compile (default 8). */
  writeConcurrency?: number;
  /**
   * Called when an account is quarantined (its routing could not be written: the apiserver refused a shard or
   * bundle write because of this account's part) and again with `undefined` when it is written again.
   */
  onQuarantine?: (namespace: string, quarantine: Quarantine | undefined) => void;
  /**
   * Handed each account a run compiled, with the snapshot it compiled from (undefined: the namespace is no longer an
   * account): the export controller's input (src/operator/export). Synchronous and cheap; called during the run.
   */
  onAccountCompiled?: (
    namespace: string,
    compiled: { snapshot: AccountSnapshot; account: CompiledAccount } | undefined,
  ) => void;
}

/** Why an account's routing is held back. Messages never contain tenant text or key material. */
export interface Quarantine {
  /** What was refused: `ConfigMap` (routing shard) or `Secret` (credential bundle). */
  kind: 'ConfigMap' | 'Secret';
  /** HTTP status of the refused write (400, 413 or 422). */
  status: number;
  /** The apiserver's reason, e.g. `Invalid`, `RequestEntityTooLarge`, `BadRequest`. */
  reason: string;
  /** One line for the Account condition and Event. */
  message: string;
  /** Whether the routing gateways read still holds the account's last good state (false: it was never written). */
  keptLastGood: boolean;
}

/** A credential's delivered state: a key rotation, a spec change and a disable all move `version`. */
export interface CredentialDelivery {
  /** Delivery version (status.delivery.configVersion): a digest of the envelope version and the routing entry. */
  version: string;
  /** envelopeVersion of the sealed credential: what gateway pods report per credential for their bundle volume. */
  envelope: string;
  /**
   * The compile run whose index first carried this routing entry: a pod serves the entry when routingRun() of the
   * index version it reports is at least this. 0: the entry predates this process's first run.
   */
  since: number;
}

/** A GatewayAPIKey's delivered state: its compiled entry (or its absence) and when routing first carried it. */
export interface ApiKeyDelivery {
  /** Delivery version (status.delivery.configVersion): a digest of the key's compiled routing entry. */
  version: string;
  /** As CredentialDelivery.since: a pod holds the key when routingRun() of its index is at least this. */
  since: number;
}

export interface CompileResult {
  /** Index version (sha256 of the index body) now live in the cluster. */
  version: string;
  shardWrites: number;
  bundleWrites: number;
  indexWritten: boolean;
  deleted: number;
  durationMs: number;
  /** Namespaces compiled in this run. */
  accounts: string[];
  /** Projected-volume slots a gateway pod needs to see everything: highest byok-routing-<n> / byok-bundle-<n> + 1. */
  slotsNeeded: { routing: number; bundles: number };
}
