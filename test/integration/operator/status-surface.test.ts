// What a platform team sees of the operator's work without reading code: `kubectl get` columns (GLOBAL for
// global credentials, an expiry that reads right), Normal Events when objects become Ready, a log line when
// one stops being Ready, and log lines that are valid JSON objects without repeated keys.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { REDACT_PATHS } from '../../../src/operator/logger.ts';
import { type RunningOperator, startOperator } from '../../../src/operator/run.ts';
import { credential, gatewayKey, inWorkspace, withSecret, withSpec, workspace } from '../../support/builders.ts';
import { core, createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { createSecret, metricsText, metricValue, resource } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';

const kc = testKubeConfig();

/** Keys of the top-level JSON object in `line`, in order, duplicates included (JSON.parse would hide them). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      expectKey = false;
      i = j;
    } else if (ch === '{' || ch === '[') {
      depth++;
      expectKey = ch === '{' && depth === 1;
    } else if (ch === '}' || ch === ']') depth--;
    else if (ch === ',' && depth === 1) expectKey = true;
  }
  return keys;
}

describe('operator status surface', () => {
  let ns = '';
  let routing = '';
  let op: RunningOperator;
  const logs: string[] = [];

  beforeAll(async () => {
    ns = await createAccountNamespace('op-surface');
    routing = await createTestNamespace('op-surface-routing');
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        cb();
      },
    });
    // As the CLI does: the caller binds component, the operator binds it (and identity) again, and so do
    // leader election and the compile pipeline below it.
    const logger = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } }, sink).child({
      component: 'operator',
    });
    op = await startOperator({
      kubeConfig: kc,
      routingNamespace: routing,
      watchNamespaces: [ns],
      httpPort: 0,
      httpHost: '127.0.0.1',
      logger,
      leaderElection: { enabled: true, leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2 },
    });
    await until('leadership', () => op.isLeader(), 20_000);
  }, 30_000);
  afterAll(async () => {
    await op?.stop();
  });

  test('kubectl get byok shows GLOBAL for a global credential and the workspace for a scoped one', async () => {
    const creds = resource('byokcredentials', ns);
    await createSecret(kc, ns, 'global-key', 'sk-proj-globalglobalglobal0001');
    await createSecret(kc, ns, 'team-key', 'sk-proj-teamteamteamteam00002');
    await resource('workspaces', ns).create(workspace('team'));
    await creds.create(credential('global-cred', withSecret('global-key')));
    await creds.create(credential('team-cred', withSecret('team-key'), inWorkspace('team')));
    const global = await creds.waitReady('global-cred', 'True');
    await creds.waitReady('team-cred', 'True');
    expect(global.status?.workspaceScope).toBe('GLOBAL');
    const rows = (await kubectl('get', 'byok', '-n', ns)).split('\n');
    const header = rows[0]!.split(/\s+/);
    const column = (row: string) => row.split(/\s+/)[header.indexOf('WORKSPACE')];
    expect(column(rows.find((r) => r.startsWith('global-cred '))!)).toBe('GLOBAL');
    expect(column(rows.find((r) => r.startsWith('team-cred '))!)).toBe('team');
    // Each door points at the other.
    expect(await kubectl('explain', 'byokcredential.spec.workspace')).toMatch(/docs\/api\.md/);
  });

  test('kubectl get gwkey prints the expiry as a time, past and future alike', async () => {
    const keys = resource('gatewayapikeys', ns);
    await keys.create(gatewayKey('expired', 'a'.repeat(64), withSpec({ expiresAt: '2020-03-01T00:00:00Z' })));
    await keys.create(gatewayKey('future', 'b'.repeat(64), withSpec({ expiresAt: '2099-03-01T00:00:00Z' })));
    await until(
      'both keys reconciled',
      async () =>
        (await keys.get('expired')).status?.live === false && (await keys.get('future')).status?.live === true,
    );
    const out = await kubectl('get', 'gwkey', '-n', ns);
    expect(out.split('\n')[0]).toMatch(/LIVE\s+EXPIRES AT/);
    expect(out).toMatch(/expired\s+false\s+2020-03-01T00:00:00Z/);
    expect(out).toMatch(/future\s+true\s+2099-03-01T00:00:00Z/);
    expect(out).not.toContain('<invalid>');
  });

  test('becoming Ready records a Normal event; falling from Ready is logged at warn', async () => {
    const events = kc.makeApiClient(EventsV1Api);
    await until('a Normal Ready event for global-cred', async () =>
      (await events.listNamespacedEvent({ namespace: ns })).items.some(
        (e) => e.regarding?.name === 'global-cred' && e.type === 'Normal' && e.reason === 'Ready',
      ),
    );
    await core(kc).deleteNamespacedSecret({ namespace: ns, name: 'global-key' });
    await resource('byokcredentials', ns).waitReady('global-cred', 'False', 'SecretNotFound');
    const fell = await until('a log line for the Ready -> False transition', () =>
      logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.name === 'global-cred' && l.from === 'True' && l.to === 'False'),
    );
    expect(fell).toMatchObject({
      level: 40,
      kind: 'BYOKCredential',
      namespace: ns,
      reason: 'SecretNotFound',
      msg: 'BYOKCredential is no longer Ready',
    });
  });

  test('byok_credential_ready counts credentials per Ready status and reason (no per-credential series)', async () => {
    const text = await metricsText(op);
    expect(metricValue(text, 'byok_credential_ready', { status: 'True', reason: 'Ready' })).toBe(1);
    expect(metricValue(text, 'byok_credential_ready', { status: 'False', reason: 'SecretNotFound' })).toBe(1);
    expect(text).not.toMatch(/byok_credential_ready\{[^}]*name=/);
  });

  test('no log line repeats a key (component, identity bound at several levels)', async () => {
    const compileLines = logs.filter((l) => l.includes('"subcomponent":"compile"'));
    const leaderLines = logs.filter((l) => l.includes('"subcomponent":"leader-election"'));
    expect(compileLines.length + leaderLines.length).toBeGreaterThan(0);
    for (const line of logs) {
      const keys = topLevelKeys(line);
      expect({ line, duplicates: keys.filter((k, i) => keys.indexOf(k) !== i) }).toEqual({ line, duplicates: [] });
    }
  });
});
