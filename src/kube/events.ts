// Kubernetes Events (events.k8s.io/v1) whose text always passes through a redaction function first, so a
// message built from a validation error can never carry key material into the Event API. Identical events for
// the same object are suppressed for a while instead of piling up.

import { randomBytes } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { kubeClient } from './client.ts';
import type { KubeAccess } from './kubeconfig.ts';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  /** Records an event about `regarding`. `secrets` are extra literal values to scrub from the note. */
  record(
    regarding: KubernetesObject,
    type: EventType,
    reason: string,
    note: string,
    secrets?: readonly string[],
  ): Promise<void>;
}

export interface EventRecorderOptions {
  kubeConfig: KubeAccess;
  /** reportingController, e.g. 'byok.gateway.dev/operator'. */
  controller: string;
  /** reportingInstance, e.g. the pod name. */
  instance: string;
  redact?: (text: string) => string;
  logger?: Logger;
  /** Identical (object, type, reason, note) events are not re-sent within this window. Default 10 min. */
  dedupeSeconds?: number;
  canWrite?: () => boolean;
}

// Things that look like credentials even when we were not told the literal value: provider key prefixes,
// PEM blocks, and long base64/base62 runs (64-hex hashes and UUIDs are not secret and stay readable).
const SECRET_PATTERNS: RegExp[] = [
  /-----BEGIN [A-Z ]+-----[\s\S]*?(-----END [A-Z ]+-----|$)/g,
  /\b(?:sk|pk|rk|xai|gsk|AKIA|ASIA|AIza)[-_A-Za-z0-9]{8,}/g,
  /(?<![0-9a-f])(?=[A-Za-z0-9+/_=-]*[g-zG-Z+/_=])[A-Za-z0-9+/_=-]{32,}/g,
];

/** Default redaction: scrubs the given literal values and anything shaped like key material. */
export function redactText(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const s of secrets) {
    if (s.length >= 4) out = out.split(s).join('[REDACTED]');
  }
  for (const re of SECRET_PATTERNS) out = out.replace(re, '[REDACTED]');
  return out.length > 1024 ? `${out.slice(0, 1021)}...` : out;
}

function microTime(d = new Date()): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export function createEventRecorder(opts: EventRecorderOptions): EventRecorder {
  const client = kubeClient(opts.kubeConfig);
  const recent = new Map<string, number>();
  const ttl = (opts.dedupeSeconds ?? 600) * 1000;
  return {
    async record(regarding, type, reason, note, secrets = []) {
      if (opts.canWrite && !opts.canWrite()) return;
      const ns = regarding.metadata?.namespace;
      const name = regarding.metadata?.name;
      if (!ns || !name) return;
      const clean = (opts.redact ?? ((t: string) => t))(redactText(note, secrets));
      const key = `${regarding.metadata?.uid ?? `${ns}/${name}`}|${type}|${reason}|${clean}`;
      const now = Date.now();
      const last = recent.get(key);
      if (last !== undefined && now - last < ttl) return;
      recent.set(key, now);
      if (recent.size > 10_000) for (const [k, t] of recent) if (now - t >= ttl) recent.delete(k);
      const body = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name: `${name}.${randomBytes(8).toString('hex')}`, namespace: ns },
        eventTime: microTime(),
        reportingController: opts.controller,
        reportingInstance: opts.instance,
        action: 'Reconcile',
        reason,
        note: clean,
        type,
        regarding: {
          apiVersion: regarding.apiVersion,
          kind: regarding.kind,
          name,
          namespace: ns,
          uid: regarding.metadata?.uid,
          resourceVersion: regarding.metadata?.resourceVersion,
        },
      };
      try {
        await client.request('POST', `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`, { body });
      } catch (err) {
        // Events are best effort; never fail a reconcile because of them.
        recent.delete(key);
        opts.logger?.warn({ err: err instanceof Error ? err.message : String(err), reason }, 'could not record event');
      }
    },
  };
}
